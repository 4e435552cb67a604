"""Issue 45 in headless Chromium: a visitor's judgements in the Ask tab become their own test set that Evaluate runs.

One visitor ("judy") uploads two small Ukrainian documents, asks three six-option questions and judges one right,
one wrong with another option and page, and one as "not in these documents" (issue 55: it keeps its options, its
document and page are emptied, and its verdict is the one a run gives that answer); after a reload the three are
listed in Evaluate, the six-option set runs without a file and shows its score and pictures, and the downloaded
CSV is read by the command's reader with its gold columns, and ``python -m pipeline.evaluate`` gives it the score
the tab showed. The judge row and the list are photographed at
1280×720 as ``$TEST_OUTPUT_DIR/docs/ask-judge.png`` and ``evaluate-judged.png`` (copied into docs/).
"""
from __future__ import annotations

import json
import re

import pytest

from pipeline.evaluation.questions import NONE, read_questions

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

    ask(judy, *DAY_Q)  # 3: not in these documents (issue 55: a six-option question that keeps its options)
    expect(judy.locator("#judge-option input")).to_be_enabled()
    if "Not found" in judy.locator("#answer").inner_text():  # the app said so: "Right" is "not in these documents"
        expect(judy.locator("#judge-not-in")).to_be_hidden()
        expect(judy.locator("#judge-right")).to_contain_text("Right: not in these documents")
        judy.locator("#judge-right").click()
        verdict = "right"
    else:  # a letter was shown: wrong, not in these documents — its document and page emptied, saved by Enter
        expect(judy.locator("#judge-doc input")).not_to_have_value("")
        judy.locator("#judge-not-in input").check()
        expect(judy.locator("#judge-doc input")).to_have_value("", timeout=10_000)
        expect(judy.locator("#judge-page input")).to_have_value("")
        expect(judy.locator("#judge-option input")).to_be_disabled()
        judy.locator("#judge-note textarea").fill("доби в правилах немає")
        snap(judy, out_dir, "judge", "ask-judge-not-in.png")
        judy.locator("#judge-note textarea").press("Enter")
        verdict = "wrong"
    expect(judy.locator("#judge-message")).to_contain_text(f"Saved as J003 — judged {verdict}, the right answer «not "
                                                           "in these documents»", timeout=30_000)
    assert " page " not in judy.locator("#judge-message").inner_text()  # no document, no page
    ask(judy, D.MUSEUM_Q[0], D.MUSEUM_Q[1])  # asked again: its judgement is shown
    expect(judy.locator("#judge-message")).to_contain_text("Judged before as J001 (right", timeout=30_000)

    judy.reload()
    judy.wait_for_function("() => !!localStorage.getItem('pdfqa-session')")
    tab(judy, "Evaluate")
    expect(judy.locator("#judged-list")).to_contain_text("Your judged questions (3: 3 six-option)", timeout=30_000)
    judy.locator("#judged-list").get_by_text(re.compile("Your judged questions")).first.click()  # open the list
    expect(judy.locator("#judged-table")).to_contain_text("J003")
    rows = {r[0]: r for r in table_rows(judy, "judged-table")}
    assert set(rows) == {"J001", "J002", "J003"}, rows
    assert rows["J001"][2] == "right" and rows["J002"][2:4] == ["wrong", letter] and rows["J002"][5] == "2", rows
    # issue 55: judged "not in these documents", a six-option question keeps its options, has no document or page,
    # and its judgement is the one a run gives the same answer
    assert rows["J003"][2:7] == [verdict, "not in these documents", "", "", "six-option"], rows
    expect(judy.locator("#run-judged-free")).to_be_hidden()  # no plain question: no plain run
    snap(judy, out_dir, "judged-list", "evaluate-judged.png")

    with judy.expect_download() as dl:
        judy.locator("#judged-downloads a[download='judged-questions.csv']").click()
    assert dl.value.suggested_filename == "judged-questions.csv"
    questions, problems = read_questions(open(dl.value.path(), "rb").read())
    gold = {q.qid: (q.gold_answer, q.gold_doc, q.gold_page) for q in questions}
    assert gold["J002"] == (letter, "parking.pdf", 2) and gold["J001"][1:] == ("muzei.pdf", 1), (gold, problems)
    assert gold["J003"] == (NONE, None, None), gold
    assert next(q.options for q in questions if q.qid == "J003") == DAY_Q[1]  # its options kept in the CSV

    judy.locator("#run-judged").click()
    expect(judy.locator("#eval-message")).to_contain_text("finished: 3 questions", timeout=2 * ANSWER_TIMEOUT)
    expect(judy.locator("#score")).to_contain_text("accuracy")
    expect(judy.locator("#reliability svg").first).to_be_visible()
    expect(judy.locator("#losses svg").first).to_be_visible()
    expect(judy.locator("#question-table")).to_contain_text("J002")
    run_rows = {r[0]: r for r in table_rows(judy, "question-table") if r}
    assert run_rows["J003"][3] == "none (not in these documents)", run_rows
    # the run scores the answer as the judgement did: right as "not found", wrong as a letter
    assert (run_rows["J003"][8] == "right") == (verdict == "right"), (run_rows["J003"], verdict)
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
    assert got["n"] == 3 and round(got["score"], 3) == shown, (got, shown)
