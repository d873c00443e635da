"""Knowledge-base rules: chunking laws, text normalisation, the document machine, search terms,
source URLs and file names."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import InvalidTransition, ValidationFailed
from domain.knowledge import (
    DOCUMENT_MACHINE,
    Document,
    chunk_spans,
    chunk_text,
    clean_file_name,
    content_hash,
    file_name_for_page,
    normalise_source_url,
    normalise_text,
    search_terms,
)
from tests.properties import examples

NOW = datetime(2026, 3, 1, tzinfo=UTC)

pieces = st.sampled_from(["a", "b", "c", " ", "xyz", ".", ",", ";", "!", "?", "\n", "\t", "\n\n", "é", "日本", "word "])
texts = st.lists(pieces, max_size=800).map("".join)
sizes = st.integers(min_value=1, max_value=400)


@settings(max_examples=examples(300))
@given(texts, sizes, st.data())
def test_chunk_spans_cover_the_text_in_order_within_the_size(text: str, size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(min_value=0, max_value=size - 1))
    spans = chunk_spans(text, size, overlap)
    if not text:
        assert spans == []
        return
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for start, end in spans:
        assert 0 < end - start <= size
    for (s1, e1), (s2, e2) in itertools.pairwise(spans):
        assert s1 < s2 <= e1 < e2  # moves forward, no gap, no chunk inside another
        assert e1 - s2 <= overlap  # overlaps by at most the overlap


@given(texts)
def test_chunks_are_non_empty_bounded_and_keep_every_word(text: str) -> None:
    chunks = chunk_text(text, 120, 20)
    assert all(chunk and len(chunk) <= 120 and chunk == chunk.strip() for chunk in chunks)
    clean = normalise_text(text)
    assert (chunks == []) == (clean == "")
    joined = " ".join(chunks)
    for word in clean.split():
        if len(word) < 100:
            assert word in joined


def test_chunks_prefer_paragraph_then_sentence_breaks() -> None:
    paragraph = ("word " * 30).strip() + "."
    text = "\n\n".join([paragraph] * 6)
    chunks = chunk_text(text, 400, 0)
    assert all(chunk.endswith(".") for chunk in chunks)
    sentences = " ".join(["This is a sentence of moderate length."] * 30)
    assert all(c.endswith(".") for c in chunk_text(sentences, 200, 0))


def test_long_text_without_spaces_is_cut_hard() -> None:
    assert [len(c) for c in chunk_text("x" * 2500, 1000, 100)] == [1000, 1000, 700]


def test_chunk_spans_reject_a_bad_overlap() -> None:
    with pytest.raises(ValueError):
        chunk_spans("abc", 10, 10)


def test_normalise_text_and_content_hash() -> None:
    messy = "  Hello\r\n\r\n\r\n\tworld \x00\x07 \u00a0 again  \x0c"
    assert normalise_text(messy) == "Hello\n\nworld again"
    assert content_hash(messy) == content_hash("Hello\n\nworld   again")
    assert content_hash("a") != content_hash("b")
    assert content_hash("Cafe\u0301") == content_hash("Caf\u00e9")  # NFC


def test_document_machine_moves_from_processing_only() -> None:
    doc = Document(1, 1, 1, "a.txt", "txt", "upload", created_at=NOW, updated_at=NOW)
    ready = doc.finish(3, NOW)
    assert (ready.status, ready.chunk_count) == ("ready", 3)
    failed = doc.fail("broken", NOW)
    assert (failed.status, failed.error) == ("failed", "broken")
    for done in (ready, failed):
        with pytest.raises(InvalidTransition):
            done.finish(1, NOW)
        with pytest.raises(InvalidTransition):
            done.fail("x", NOW)
    assert DOCUMENT_MACHINE.states() == {"processing", "ready", "failed"}


@given(st.lists(st.sampled_from(["finish", "fail"]), max_size=5))
def test_any_trigger_sequence_ends_in_a_known_state(triggers: list[str]) -> None:
    doc = Document(1, 1, 1, "a.txt", "txt", "upload")
    moves = 0
    for trigger in triggers:
        try:
            doc = doc.finish(1, NOW) if trigger == "finish" else doc.fail("e", NOW)
            moves += 1
        except InvalidTransition:
            assert doc.status in ("ready", "failed")
    assert moves == (1 if triggers else 0)
    assert doc.status in ("processing", "ready", "failed")


def test_search_terms_are_distinct_lowercase_words_only() -> None:
    assert search_terms('Refund "policy" OR refund* NEAR(x) -- DROP;') == ["refund", "policy", "or", "near", "x",
                                                                         "drop"]
    assert search_terms("___ !!! ...") == []
    assert search_terms("Straße Ünïcode 42") == ["straße", "ünïcode", "42"]
    assert len(search_terms(" ".join(f"w{i}" for i in range(100)))) == 32


@given(st.text(max_size=200))
def test_search_terms_never_carry_query_syntax(query: str) -> None:
    for term in search_terms(query):
        assert term.isalnum() and term == term.lower() and len(term) <= 64


@pytest.mark.parametrize(("raw", "canonical"), [
    ("HTTP://Example.COM", "http://example.com/"),
    ("https://example.com:443/a?b=1#frag", "https://example.com/a?b=1"),
    ("http://example.com:8080/x", "http://example.com:8080/x"),
    ("http://0x7f.1/", "http://127.0.0.1/"),
    ("http://bücher.example/straße", "http://xn--bcher-kva.example/stra%C3%9Fe"),
    ("  http://example.com/page  ", "http://example.com/page"),
])
def test_source_urls_are_normalised(raw: str, canonical: str) -> None:
    assert normalise_source_url(raw) == canonical


@pytest.mark.parametrize("raw", ["ftp://example.com/", "example.com", "http://", "http://u:p@example.com/", ""])
def test_malformed_source_urls_are_refused(raw: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        normalise_source_url(raw)
    assert "url" in caught.value.details["validation_errors"]


def test_file_names_are_cleaned() -> None:
    assert clean_file_name("../../etc/passwd") == "passwd"
    assert clean_file_name("C:\\Users\\me\\notes.txt") == "notes.txt"
    assert clean_file_name("bad\x00name\x1f.md") == "badname.md"
    assert clean_file_name("") == "upload" and clean_file_name("..") == "upload"
    assert len(clean_file_name("a" * 600)) == 255
    assert file_name_for_page("https://example.com/p", "  Returns &\n refunds ") == "Returns & refunds"
    assert file_name_for_page("https://example.com/p", None) == "https://example.com/p"
