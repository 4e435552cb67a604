"""Hostile input through the browser: markup in names, text and questions stays text; limits say so.

"eve" is a fresh visitor of the shared test app. A second app with tiny limits
(upload size, documents per library) shows what a visitor sees at each limit.
"""
from __future__ import annotations

import pytest

from . import docs as D
from .docs import pdfgen
from .harness import App, free_port, open_app, visitor_fixture
from .test_browser import (ANSWER_TIMEOUT, READY, expect, row_locator, shot, status_rows, tab, table_rows, text_of,
                           upload, wait_indexing_done, wait_until)

# markup that would run script or inject elements if any view rendered it as HTML
XSS = "<img src=x onerror=\"window.__pwned=1;alert(1)\"><script>window.__pwned=2</script>"
NAME = "<b>звіт №5 — 2026 <img src=x onerror=alert(2)>.pdf"  # no "/": a file name cannot carry it
QID = "<i>q1</i>"


def armed(page) -> list[str]:
    """Record any dialog (alert/confirm) the page opens: an executed payload would open one."""
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    return dialogs


def pwned(page) -> bool:
    return page.evaluate("() => window.__pwned !== undefined")


eve = visitor_fixture("eve")


@pytest.mark.timeout(900)
def test_markup_in_file_names_pdf_text_and_questions_shows_as_text(eve, tmp_path, out_dir):
    dialogs = armed(eve)
    sections = [("Оплата <script>alert(3)</script>", f"{XSS} Вартість однієї години паркування становить "
                 "20 гривень. " + D.PARKING_FILLER)]
    pdf = tmp_path / NAME
    pdf.write_bytes(pdfgen.ukrainian_pdf("Паркінг <b>жирний</b>", sections))
    upload(eve, "upload", [pdf])
    wait_indexing_done(eve, 1)
    rows = status_rows(eve)
    assert rows[0][1] in READY, rows
    # the name shows as text: Gradio's upload drops "<" and ">" from file names; the rest is shown, never rendered
    docs = text_of(eve, "documents")
    assert "звіт №5 — 2026" in docs and "img src=x onerror=alert(2).pdf" in docs, docs
    assert eve.locator("#documents b, #documents img, #ingest-status img").count() == 0

    # a question whose evidence and options carry markup: every view of the answer shows it as text
    tab(eve, "Ask")
    eve.locator("#question textarea").fill(f"{XSS} Скільки коштує одна година паркування?")
    for letter, opt in zip("ABCDEF", ["10 гривень", "<b>20 гривень</b>", "30 гривень", "40 гривень",
                                      "безкоштовно", XSS]):
        eve.locator(f"#option-{letter} textarea").fill(opt)
    eve.locator("#ask").click()
    expect(eve.locator("#answer")).to_contain_text("Answer:", timeout=ANSWER_TIMEOUT)
    expect(eve.locator("#answer")).to_contain_text("onerror=alert(2).pdf")
    cands = text_of(eve, "candidates")
    assert "<script>window.__pwned=2</script>" in cands or "<img src=x" in cands, cands[:500]
    assert eve.locator("#answer b, #answer img, #candidates img[src='x']").count() == 0

    # an evaluation run with markup in the question id and text
    tab(eve, "Evaluate")
    csv_path = tmp_path / "hostile-questions.csv"
    q = (f"{XSS} Скільки коштує одна година паркування?", ["10 гривень", "20 гривень", "30 гривень", "40 гривень",
                                                           "безкоштовно", XSS], "B")
    shown = NAME.replace("<", "").replace(">", "")  # the name the upload kept
    csv_path.write_bytes(D.questions_csv([(QID, q, shown, 1)]))
    upload(eve, "questions-csv", [csv_path])
    eve.locator("#run-name textarea").fill("<b>run</b>")
    eve.wait_for_timeout(500)
    eve.locator("#run").click()
    expect(eve.locator("#eval-message")).to_contain_text("finished", timeout=2 * ANSWER_TIMEOUT)
    expect(eve.locator("#question-table")).to_contain_text(QID)
    row_locator(eve, "question-table", QID).locator("[role=gridcell]").first.click()
    expect(eve.locator("#question-head")).to_contain_text(f"Question {QID}", timeout=60_000)
    expect(eve.locator("#question-head")).to_contain_text("<script>window.__pwned=2</script>")
    expect(eve.locator("#score")).to_contain_text("document accuracy 1.000")
    assert eve.locator("#question-head i, #question-head img, #question-table i, #eval-message b").count() == 0
    shot(eve, out_dir, "10-hostile-markup.png")
    assert not pwned(eve) and dialogs == [], dialogs


@pytest.mark.timeout(600)
def test_limits_reached_and_model_server_down_say_so(browser, tmp_path, out_dir):
    """Tiny limits, and the answer model behind a server that is not there (nothing listens on its port)."""
    down = f"http://127.0.0.1:{free_port()}/v1"
    limited = App(tmp_path / "data", out_dir / "app-limits.log", extra_args=["--no-warmup"],
                  env={"PDFQA_MAX_UPLOAD_MB": "0.03", "PDFQA_MAX_DOCUMENTS": "1", "PDFQA_ANSWERER": "remote",
                       "PDFQA_SCORER": "letter", "PDFQA_ANSWER_URL": down, "PDFQA_REMOTE_TIMEOUT": "5"})
    limited.start()
    try:
        page = open_app(browser, limited)
        small = tmp_path / "muzei.pdf"
        small.write_bytes(D.museum_pdf())
        other = tmp_path / "parking.pdf"
        other.write_bytes(D.parking_pdf())
        big = tmp_path / "velykyi.pdf"
        big.write_bytes(D.heater_pdf())  # ten pages: over 30 kB
        assert small.stat().st_size < 30_000 and other.stat().st_size < 30_000 < big.stat().st_size
        upload(page, "upload", [small])
        wait_indexing_done(page, 1)
        assert status_rows(page)[0][1] in READY
        # the second document is over the documents-per-library limit
        upload(page, "upload", [other])
        row = wait_until(page, lambda: next((r for r in status_rows(page) if r[0] == "parking.pdf"
                                             and r[1] in (*READY, "failed")), None), 120, "parking.pdf's status")
        assert row[1] == "failed" and "PDFQA_MAX_DOCUMENTS" in row[2], row
        # an upload over the size limit is refused by the server before it is stored, with a message
        upload(page, "upload", [big])
        expect(page.get_by_text("exceed the maximum allowed size").first).to_be_visible(timeout=30_000)
        assert "velykyi.pdf" in page.get_by_text("exceed the maximum allowed size").first.inner_text()
        expect(page.locator("#upload")).to_contain_text("up to 0.03 MB each")
        shot(page, out_dir, "11-limits.png")
        docs = [r[0] for r in table_rows(page, "documents")]  # "title — file name"
        assert len(docs) == 1 and docs[0].endswith("muzei.pdf"), docs
        # the answer server is down: the question gets a clear message naming it, the app goes on
        tab(page, "Ask")
        page.locator("#block textarea").fill(D.block(D.MUSEUM_Q))
        page.locator("#fill").click()
        page.locator("#ask").click()
        expect(page.get_by_text("cannot be reached").first).to_be_visible(timeout=60_000)
        assert down.split("/v1")[0] in page.get_by_text("cannot be reached").first.inner_text()
        # ... and an evaluation run records the question as failed, with the reason, and finishes
        tab(page, "Evaluate")
        csv_path = tmp_path / "q.csv"
        csv_path.write_bytes(D.questions_csv([("q1", D.MUSEUM_Q, "muzei.pdf", 1)]))
        upload(page, "questions-csv", [csv_path])
        page.wait_for_timeout(500)
        page.locator("#run").click()
        expect(page.locator("#eval-message")).to_contain_text("finished: 1 question, 1 failed", timeout=120_000)
        expect(page.locator("#eval-message")).to_contain_text("cannot be reached")
        expect(page.locator("#question-table")).to_contain_text("q1")
        shot(page, out_dir, "12-server-down.png")
        page.context.close()
    finally:
        limited.stop()
