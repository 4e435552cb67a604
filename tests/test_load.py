"""Load on loopback: 16 concurrent visitors (gradio_client) against the real app, in waves.

The figures for the README come from the benchmark command (``python -m bench.load``,
bench/load.md); this test runs the same code shorter and checks what must always hold:
no request fails, no visitor ever sees another's document, and the app's memory does
not grow as visitors come and go.
"""

import pytest

from bench.load import report, run
from tests.browser.harness import App

CLIENTS, WAVES = 16, 3


@pytest.mark.timeout(1800)
def test_sixteen_visitors_in_waves_no_errors_isolated_memory_bounded(tmp_path):
    app = App(tmp_path / "data", tmp_path / "app.log")
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
    # closed beyond the open-library cap; 150 MB of slack for allocator noise)
    first, last = r["rss_after_wave_mb"][0], r["rss_after_wave_mb"][-1]
    assert last <= first + 150, r["rss_after_wave_mb"]
    # sessions on disk: one per visitor, under the configured cap
    assert len(list((tmp_path / "data" / "sessions").iterdir())) == CLIENTS * WAVES
