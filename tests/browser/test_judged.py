"""Issue 45 in headless Chromium: a visitor's judgements in the Ask tab become their own test set that Evaluate runs.

One visitor ("judy") uploads two small Ukrainian documents, asks three six-option questions and judges one right,
one wrong with another option and page, and one wrong as "not in these documents"; after a reload the three are
listed in Evaluate, the six-option set runs without a file and shows its score and pictures, and the downloaded
CSV is read by the command's reader with its gold columns, and ``python -m pipeline.evaluate`` gives it the score
the tab showed. The judge row and the list are photographed at
1280×720 as ``$TEST_OUTPUT_DIR/docs/ask-judge.png`` and ``evaluate-judged.png`` (copied into docs/).
"""
from __future__ import annotations

import json
import re

import pytest

from pipeline.evaluation.questions import read_questions

from . import docs as D
from .harness import visitor_fixture
from .test_browser import ANSWER_TIMEOUT, expect, snap, tab, table_rows, upload, wait_indexing_done
from .test_first_use import DAY_Q, fill

judy = visitor_fixture("judy")


def ask(page, question: str, options: list[str]) -> None:
    tab(page, "Ask")
    fill(page, question, options)
    page.locator("#ask").click()
    expect(page.locator("#judge")).to_be_hidden(timeout=30_000)  # the last answer's row goes with it
    expect(page.locator("#ask-status")).to_contain_text(re.compile("Answered in|Searched in"), timeout=ANSWER_TIMEOUT)
    expect(page.locator("#judge")).to_be_visible(timeout=30_000)


@pytest.mark.timeout(900)
def test_judged_answers_become_a_test_set_that_evaluate_runs(judy, tmp_path, out_dir, models, monkeypatch):
    for name, data in (("muzei.pdf", D.museum_pdf()), ("parking.pdf", D.parking_pdf())):
        (tmp_path / name).write_bytes(data)
    upload(judy, "upload", [tmp_path / "muzei.pdf", tmp_path / "parking.pdf"])
    wait_indexing_done(judy, 2)

    ask(judy, D.MUSEUM_Q[0], D.MUSEUM_Q[1])  # 1: right
    judy.locator("#judge-right").click()
    expect(judy.locator("#judge-message")).to_contain_text("Saved as J001 — judged right", timeout=30_000)

    ask(judy, D.PARKING_Q[0], D.PARKING_Q[1])  # 2: wrong, another option and page
    expect(judy.locator("#judge-doc input")).to_have_value(re.compile("parking.pdf"))
    judy.locator("#judge-option input").click()
    other = judy.locator("#judge-option").get_by_role("option").first
    letter = (other.inner_text() or "?")[0]
    other.click()
    judy.locator("#judge-page input").fill("2")
    judy.locator("#judge-wrong").click()
    expect(judy.locator("#judge-message")).to_contain_text("Saved as J002 — judged wrong", timeout=30_000)
    expect(judy.locator("#judge-message")).to_contain_text("page 2")
    snap(judy, out_dir, "judge", "ask-judge.png")

    ask(judy, *DAY_Q)  # 3: wrong, not in these documents, saved by Enter in the note
    judy.locator("#judge-not-in input").check()
    judy.locator("#judge-note textarea").fill("доби в правилах немає")
    judy.locator("#judge-note textarea").press("Enter")
    expect(judy.locator("#judge-message")).to_contain_text("Saved as J003 — judged wrong, the right answer «not in "
                                                           "these documents»", timeout=30_000)
    ask(judy, D.MUSEUM_Q[0], D.MUSEUM_Q[1])  # asked again: its judgement is shown
    expect(judy.locator("#judge-message")).to_contain_text("Judged before as J001 (right", timeout=30_000)

    judy.reload()
    judy.wait_for_function("() => !!localStorage.getItem('pdfqa-session')")
    tab(judy, "Evaluate")
    expect(judy.locator("#judged-list")).to_contain_text("Your judged questions (3: 2 six-option, 1 plain)",
                                                         timeout=30_000)
    judy.locator("#judged-list").get_by_text(re.compile("Your judged questions")).first.click()  # open the list
    expect(judy.locator("#judged-table")).to_contain_text("J003")
    rows = {r[0]: r for r in table_rows(judy, "judged-table")}
    assert set(rows) == {"J001", "J002", "J003"}, rows
    assert rows["J001"][2] == "right" and rows["J002"][2:4] == ["wrong", letter] and rows["J002"][5] == "2", rows
    assert rows["J003"][3] == "not in these documents" and rows["J003"][6] == "plain", rows
    expect(judy.locator("#run-judged-free")).to_be_visible()  # the plain set is a run of its own, offered apart
    snap(judy, out_dir, "judged-list", "evaluate-judged.png")

    with judy.expect_download() as dl:
        judy.locator("#judged-downloads a[download='judged-questions.csv']").click()
    assert dl.value.suggested_filename == "judged-questions.csv"
    questions, problems = read_questions(open(dl.value.path(), "rb").read())
    gold = {q.qid: (q.gold_answer, q.gold_doc, q.gold_page) for q in questions}
    assert gold["J002"] == (letter, "parking.pdf", 2) and gold["J001"][1:] == ("muzei.pdf", 1), (gold, problems)

    judy.locator("#run-judged").click()
    expect(judy.locator("#eval-message")).to_contain_text("finished: 2 questions", timeout=ANSWER_TIMEOUT)
    expect(judy.locator("#score")).to_contain_text("accuracy")
    expect(judy.locator("#reliability svg").first).to_be_visible()
    expect(judy.locator("#losses svg").first).to_be_visible()
    expect(judy.locator("#question-table")).to_contain_text("J002")
    # the downloaded CSV through `python -m pipeline.evaluate` (in process, on the models already loaded): the score
    # the Evaluate tab showed for the same questions over the same documents
    shown = float(re.search(r"Score: ([0-9.]+)", judy.locator("#score").inner_text()).group(1))
    from pipeline import evaluate as ev
    from pipeline import qa

    monkeypatch.setattr(qa, "Models", lambda settings: models)
    out = tmp_path / "out"
    assert ev.main(["--pdfs", str(tmp_path), "--questions", str(dl.value.path()), "--out", str(out),
                    "--data-dir", str(tmp_path / "lib")]) == 0
    got = json.loads((out / "metrics.json").read_text())
    assert got["n"] == 2 and round(got["score"], 3) == shown, (got, shown)
