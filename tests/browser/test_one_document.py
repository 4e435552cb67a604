"""Issue 55 in headless Chromium, the Ask tab of a library of one document ("una"): a question about something
it does not hold reads "Not found in this document", and the status line beside Answer says the same (it said
"not found in your documents"); an answered question's chart is headed with the answer's own word,
"probability" (not "Option likelihood"), and the candidates' Document column breaks no word. Photographed at
1280×720 as ``$TEST_OUTPUT_DIR/screenshots/one-document-<step>-1280x720.png``.
"""
from __future__ import annotations

import pytest

from . import docs as D
from .harness import visitor_fixture
from .test_browser import expect, shot_at, text_of, upload, wait_indexing_done
from .test_first_use import ABSENT_Q
from .test_judged import ask
from .test_screens import broken_words

una = visitor_fixture("una")


@pytest.mark.timeout(900)
def test_one_document_says_this_document_in_the_heading_and_the_status(una, tmp_path, out_dir):
    (tmp_path / "muzei.pdf").write_bytes(D.museum_pdf())
    upload(una, "upload", [tmp_path / "muzei.pdf"])
    wait_indexing_done(una, 1)
    ask(una, *ABSENT_Q)
    expect(una.locator("#answer")).to_contain_text("Not found in this document")
    status = text_of(una, "ask-status")
    assert "not found in this document" in status and "your documents" not in status, status
    assert "your documents" not in text_of(una, "answer"), text_of(una, "answer")
    shot_at(una, out_dir, "ask-status", "one-document-not-found")


@pytest.mark.timeout(900)
def test_an_answer_is_charted_as_probability_and_its_candidates_break_no_word(una, out_dir):
    ask(una, D.MUSEUM_Q[0], D.MUSEUM_Q[1])
    expect(una.locator("#answer")).to_contain_text("Answer: C")
    expect(una.locator("#ask-status")).to_contain_text("Answered in")
    chart = text_of(una, "probabilities")
    assert "Probability of each option" in chart and "likelihood" not in chart, chart
    assert broken_words(una, "candidates") == []
    shot_at(una, out_dir, "answer", "one-document-answer")
    shot_at(una, out_dir, "candidates", "one-document-candidates")
