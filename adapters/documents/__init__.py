"""Reading documents: text extraction from uploaded files and fetched pages."""

from adapters.documents.extraction import LocalTextExtractor
from adapters.documents.isolated import IsolatedTextExtractor

__all__ = ["IsolatedTextExtractor", "LocalTextExtractor"]
