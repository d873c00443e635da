"""The model's streamed text cut into sentences as they complete, and a line cut to what the caller heard."""

from __future__ import annotations

from application.conversation.text import SentenceSplitter, heard_part


def test_sentences_come_out_as_soon_as_they_are_complete() -> None:
    splitter = SentenceSplitter()
    out = []
    for piece in ["Hello", " there, Ada", "! We open", " at 9.30 on", " weekdays. Dr. Smith", " sees you", " then."]:
        out.append(splitter.feed(piece))
    assert out == [[], [], ["Hello there, Ada!"], [], ["We open at 9.30 on weekdays."], [], []]
    assert splitter.flush() == "Dr. Smith sees you then."  # "Dr." does not end a sentence
    assert splitter.flush() is None


def test_short_pieces_wait_for_the_next_sentence() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed("Hi. Yes. ") == []
    assert splitter.feed("How can I help you today? ") == ["Hi. Yes. How can I help you today?"]
    assert splitter.feed("Line one\nLine two is longer\n") == ["Line one\nLine two is longer"]


def test_a_line_keeps_the_words_sent_whole() -> None:
    text = "one two three four five"
    assert heard_part(text, 1000, 1000) == text
    assert heard_part(text, 599, 1000) == "one two"
    assert heard_part(text, 600, 1000) == "one two three"
    assert heard_part(text, 0, 1000) == ""
