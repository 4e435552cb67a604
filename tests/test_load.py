"""Load on loopback: 8 concurrent visitors (gradio_client) against the real app, in waves.

The figures for the README come from the benchmark command (``python -m bench.load``,
bench/load.md); this test runs the same code smaller (8 visitors a wave, 4 per core: still more than the 8 libraries
held open, so the open-library cap is exercised; the benchmark's 16 took 169-335 s in CI) and checks what must
always hold:
no request fails, no visitor ever sees another's document, and the app's memory does
not grow as visitors come and go.
"""

import pytest

from bench.load import report, run
from tests.browser.harness import App

CLIENTS, WAVES = 8, 3


@pytest.mark.timeout(1800)
def test_eight_visitors_in_waves_no_errors_isolated_memory_bounded(tmp_path):
    # Gradio keeps each page session's state until PDFQA_MAX_PAGE_SESSIONS are held: 2 waves here, so the
    # third wave's visitors push the first wave's out and the bound is exercised
    app = App(tmp_path / "data", tmp_path / "app.log", env={"PDFQA_MAX_PAGE_SESSIONS": str(2 * CLIENTS)})
    app.start()
    try:
        r = run(app.url, app.proc.pid, CLIENTS, WAVES, seconds=0)
    finally:
        app.stop()
    print("\n" + report(r, f"--clients {CLIENTS} --waves {WAVES} --seconds 0"))
    assert r["errors"] == []
    assert r["isolation_breaches"] == []
    assert r["served"]["upload"] == r["served"]["ask"] == CLIENTS * WAVES
    assert r["answer_accuracy"] >= 0.8  # each visitor's fact is in its own one-page PDF only
    # visitors came and went: the last wave leaves the app no bigger than the first did (sessions' pipelines are
    # closed beyond the open-library cap, Gradio's page states beyond PDFQA_MAX_PAGE_SESSIONS, malloc arenas capped
    # by app.py; measured ~10 MB per wave; 150 MB of slack for allocator noise)
    first, last = r["rss_after_wave_mb"][0], r["rss_after_wave_mb"][-1]
    assert last <= first + 150, r["rss_after_wave_mb"]
    # sessions on disk: one per visitor, under the configured cap
    assert len(list((tmp_path / "data" / "sessions").iterdir())) == CLIENTS * WAVES


def test_a_page_whose_state_gradio_dropped_is_told_to_reload_and_finds_its_library_again(tmp_path):
    """PDFQA_MAX_PAGE_SESSIONS bounds Gradio's per-page state; the page pushed out is told what to do."""
    from gradio_client import Client

    app = App(tmp_path / "data", tmp_path / "app.log", env={"PDFQA_MAX_PAGE_SESSIONS": "1"})
    app.start()
    try:
        first = Client(app.url, verbose=False)
        sid = first.predict("", api_name="/on_load")[0]
        other = Client(app.url, verbose=False)  # a second page: the first page's state is dropped
        other.predict("", api_name="/on_load")
        status = first.predict("Котра година?", *"ABCDEF", api_name="/on_ask")[0]  # a message, not an error
        assert "reload the page" in status, status
        # the reload (a new page with the id the browser kept) is the same visitor
        again = Client(app.url, verbose=False)
        assert again.predict(sid, api_name="/on_load")[0] == sid
        for c in (first, other, again):
            c.close()
    finally:
        app.stop()
