"""Reading documents: text extraction from uploaded files and fetched pages."""

from adapters.documents.extraction import LocalTextExtractor

__all__ = ["LocalTextExtractor"]
