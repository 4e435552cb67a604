"""What a demo shows, seen as a person sees it (issue 26, Build 7): each point at 1280×720 and 1920×1080.

One new visitor ("vera") goes through a demo: an empty library, three uploads (one with a hashed file name,
one whose PDF metadata title belongs to another document), a six-option question, a plain question answered
and one not found, a finished evaluation run and a stopped one of the same three questions, and the two compared. Each step is checked
where a check can be made in the page, and photographed at both sizes under $TEST_OUTPUT_DIR/screenshots/
(``screen-<step>-<W>x<H>.png``); the 1280×720 pictures the README shows are also written to
$TEST_OUTPUT_DIR/docs/ under their docs/ names (copy them into docs/ to update the README's pictures).
"""
from __future__ import annotations

import re
import shutil

import pytest
import pymupdf

from . import docs as D
from .harness import visitor_fixture
from .test_browser import (ANSWER_TIMEOUT, ask_without_options, start_run, expect, status_rows, tab, table_rows, text_of, upload, wait_indexing_done,
                           wait_until)

SIZES = ((1280, 720), (1920, 1080))
HASHED = "0f3c9a7be21d44c58a6e1b2d3c4f5a6b7c8d9e0f.pdf"  # a file named by its hash, as in ../shared/unlp
OTHER_TITLE = "ІБУПРОФЕН таблетки, вкриті плівковою оболонкою, по 200 мг"  # another document's metadata title
NOTICE_TITLE = "Графік прибирання під’їзду"

# every word of a table's header and cells: a word laid out on more than one line was broken mid-word
BROKEN_WORDS = """(id) => {
  const out = [], root = document.getElementById(id);
  const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    if (!n.parentElement.closest('th, td, [role=columnheader], [role=gridcell]')) continue;
    for (const m of n.data.matchAll(/\\S+/g)) {
      const r = document.createRange();
      r.setStart(n, m.index);
      r.setEnd(n, m.index + m[0].length);
      const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
      if (tops.size > 1) out.push(m[0]);
    }
  }
  return out;
}"""


def notice_pdf() -> bytes:
    """A one-page notice made from another document's file: its metadata title still names a medicine."""
    data = D.ukrainian_pdf(NOTICE_TITLE, [("Розклад", "Сходи миють щовівторка та щосуботи до 10:00. "
                                           "Сміття виносять щодня о 7:00.")], footer=None)
    doc = pymupdf.open("pdf", data)
    doc.set_metadata({**{k: v for k, v in (doc.metadata or {}).items() if k not in ("format", "encryption")},
                      "title": OTHER_TITLE})
    return doc.tobytes(no_new_id=True)


def look(page, out_dir, anchor: str, step: str, docs_name: str | None = None, top: bool = False) -> None:
    """``step`` photographed at both sizes, the window scrolled to ``#anchor`` (or to the top); the 1280×720 one
    also as ``docs/<docs_name>``; the window returns to the tests' size."""
    for w, h in SIZES:
        page.set_viewport_size({"width": w, "height": h})
        if top:
            page.evaluate("() => window.scrollTo(0, 0)")
        else:
            page.locator(f"#{anchor}").evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(700)
        p = out_dir / "screenshots" / f"screen-{step}-{w}x{h}.png"
        p.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(p))
        if docs_name and w == 1280:
            (out_dir / "docs").mkdir(exist_ok=True)
            shutil.copy(p, out_dir / "docs" / docs_name)
    page.set_viewport_size({"width": 1400, "height": 1000})


def broken_words(page, elem_id: str) -> list[str]:
    """Words of a table broken across lines at 1280 px wide."""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.wait_for_timeout(500)
    try:
        return page.evaluate(BROKEN_WORDS, elem_id)
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


vera = visitor_fixture("vera")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("screens")
    made = {"muzei.pdf": D.museum_pdf(), HASHED: D.parking_pdf(), "dovidka.pdf": notice_pdf(),
            "questions.csv": D.questions_csv([("q1", D.MUSEUM_Q, "muzei.pdf", 1), ("q2", D.PARKING_Q, HASHED, 1),
                                              ("q3", D.MUSEUM_Q, "muzei.pdf", 1)])}
    for name, data in made.items():
        (d / name).write_bytes(data)
    return {name: d / name for name in made}


@pytest.mark.timeout(900)
def test_library_offers_no_remove_when_empty_then_says_indexed_with_titles_from_headings(vera, files, out_dir):
    expect(vera.locator("#upload")).to_be_visible()
    expect(vera.locator("#remove")).to_be_hidden()  # nothing to remove
    look(vera, out_dir, "", "library-empty", "library-empty.png", top=True)
    upload(vera, "upload", [files["muzei.pdf"], files[HASHED], files["dovidka.pdf"]])
    wait_indexing_done(vera, 3)
    # the vectors follow in the background: the Indexing table then says "indexed", not "searchable"
    wait_until(vera, lambda: all(r[1] == "indexed" for r in status_rows(vera)), 600, "the uploads to say indexed")
    assert all("vectors are being added" not in r[2] for r in status_rows(vera)), status_rows(vera)
    docs = text_of(vera, "documents")
    assert "searchable" not in docs and f"{NOTICE_TITLE} — dovidka.pdf" in docs and "ІБУПРОФЕН" not in docs, docs
    assert "0f3c9a7b….pdf" in docs, docs  # the hashed name, short enough not to break
    expect(vera.locator("#remove")).to_be_visible()
    for table in ("ingest-status", "documents"):
        assert broken_words(vera, table) == [], table
    look(vera, out_dir, "ingest-status", "library-indexed", "library.png")


@pytest.mark.timeout(900)
def test_ask_button_in_view_then_an_answer_whose_chart_and_lines_read_right(vera, out_dir):
    tab(vera, "Ask")
    vera.locator("#question textarea").fill(D.PARKING_Q[0])
    for letter, opt in zip("ABCDEF", D.PARKING_Q[1]):
        vera.locator(f"#option-{letter} textarea").fill(opt)
    vera.set_viewport_size({"width": 1280, "height": 720})
    vera.evaluate("() => window.scrollTo(0, 0)")
    box = vera.locator("#ask").bounding_box()
    vera.set_viewport_size({"width": 1400, "height": 1000})
    assert box["y"] + box["height"] <= 720, box  # the Answer button without scrolling at 1280×720
    look(vera, out_dir, "", "ask-before", "ask-before.png", top=True)
    vera.locator("#ask").click()
    expect(vera.locator("#answer")).to_contain_text("Answer: D", timeout=ANSWER_TIMEOUT)
    expect(vera.locator("#probabilities")).to_contain_text("Probability of each option")
    cells = [c.inner_text() for c in vera.locator("#why td").all()]
    if len(cells) == 2:  # the runner-up is shown only with lines of its own
        mine, theirs = ({ln.strip() for ln in c.split("\n") if ln.strip()} for c in cells)
        assert not mine & theirs, cells
    else:
        expect(vera.locator("#why")).to_contain_text("has no supporting line other than these")
    assert broken_words(vera, "candidates") == []
    look(vera, out_dir, "answer", "ask-answer", "ask.png")


@pytest.mark.timeout(900)
def test_plain_questions_say_what_grounding_means_and_not_found_shows_no_support(vera, out_dir):
    ask_without_options(vera, "Скільки коштує доба паркування?")
    expect(vera.locator("#ask-status")).to_contain_text(re.compile("Answered in|Searched in"), timeout=ANSWER_TIMEOUT)
    expect(vera.locator("#ask")).to_be_enabled(timeout=60_000)
    if "Not found" not in text_of(vera, "answer"):
        expect(vera.locator("#answer")).to_contain_text("not that it answers the question")
    look(vera, out_dir, "answer", "ask-free", "ask-free.png")
    vera.locator("#question textarea").fill("Яка ціна вхідного квитка до музею для студентів?")
    vera.locator("#ask").click()
    expect(vera.locator("#answer")).to_contain_text("Not found in your documents", timeout=ANSWER_TIMEOUT)
    expect(vera.locator("#evidence-crop")).to_contain_text("not an answer")
    assert "support the answer" not in text_of(vera, "evidence-crop")
    look(vera, out_dir, "answer", "ask-not-found", "ask-not-found.png")


@pytest.mark.timeout(1200)
def test_evaluate_trace_then_a_stopped_run_compared(vera, files, out_dir):
    start_run(vera, files["questions.csv"], "finished")
    expect(vera.locator("#eval-message")).to_contain_text("Run “finished” finished", timeout=2 * ANSWER_TIMEOUT)
    assert broken_words(vera, "question-table") == []
    hashed = [r for r in table_rows(vera, "question-table") if r[0] == "q2"][0]
    assert hashed[5].endswith("— 0f3c9a7b….pdf"), hashed  # the title, then the hashed name cut short
    vera.locator("#question-table [role=row][data-index]").filter(has_text="q2").first \
        .locator("[role=gridcell]").first.click()
    expect(vera.locator("#question-head")).to_contain_text("Question q2", timeout=60_000)
    expect(vera.locator("#trace-gold img").first).to_be_visible(timeout=60_000)
    look(vera, out_dir, "question-head", "evaluate-trace", "evaluate-trace.png")
    look(vera, out_dir, "trace-predicted", "evaluate-trace-pages")

    start_run(vera, files["questions.csv"], "stopped")
    expect(vera.locator("#eval-progress")).to_contain_text("1 / 3", timeout=ANSWER_TIMEOUT)
    vera.locator("#stop").click()
    expect(vera.locator("#eval-message")).to_contain_text("stopped after", timeout=ANSWER_TIMEOUT)
    score = text_of(vera, "score")
    assert "not asked" in score and "Median 0.0 s" not in score, score
    look(vera, out_dir, "eval-message", "evaluate-stopped", "evaluate-stopped.png")
    expect(vera.locator("#run-a input")).to_have_value("finished")
    expect(vera.locator("#run-b input")).to_have_value("stopped")
    vera.locator("#compare").click()
    expect(vera.locator("#compare-summary")).to_contain_text("Before = finished, after = stopped", timeout=30_000)
    said = text_of(vera, "compare-summary")
    asked = int(re.search(r"stopped after (\d) of 3", text_of(vera, "eval-message")).group(1))
    unasked = [f"q{i}" for i in range(asked + 1, 4)]
    assert f"{len(unasked)} question{'s' if len(unasked) > 1 else ''} one of the runs did not ask" in said, said
    assert "not counted as broken" in said and ", ".join(unasked) in said, said
    assert not {r[0] for r in table_rows(vera, "flips")} & set(unasked)  # not asked is not broken
    look(vera, out_dir, "compare-summary", "evaluate-compare", "evaluate-compare.png")
