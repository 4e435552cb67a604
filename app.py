"""PDF QA web app: ``python app.py`` serves on 0.0.0.0:7860 (or $PORT).

Options (each also an environment variable; the PDFQA_* ones are settings, ``pipeline/settings.py``):
  --shared-library   PDFQA_SHARED_LIBRARY=1   one library for every visitor (default: one per browser)
  --data-dir DIR     PDFQA_DATA_DIR           where libraries and runs live (default: data; on a Hugging Face
                                              Space with persistent storage, /data/pdfqa)
  --profile NAME     PDFQA_PROFILE            settings profile (default: cpu)
  --port N           PORT                     (default 7860)
  --host ADDR        HOST                     (default 0.0.0.0)
  PDFQA_MODEL_CONCURRENCY (default 1)  model jobs (indexing, answering, runs) at once
  PDFQA_MAX_SESSIONS (default 200), PDFQA_SESSION_DAYS (default 7)  session expiry
  PDFQA_MAX_PAGE_SESSIONS (default 1000)  open pages whose state Gradio keeps in memory
  PDFQA_ORDER_CHECK (default 0)  2 or more: Evaluate's "Check option order" box starts ticked and checks that
                                many orders (else 3); the box decides for each run
  MALLOC_ARENA_MAX (default here 2)  glibc malloc arenas; more let memory creep up as visitors come and go
The HTTP clients to model servers are closed when the server stops.
"""
from __future__ import annotations

import argparse
import ctypes
import logging
import os
import threading

from pipeline.backends.registry import Models
from pipeline.settings import load_settings
from webapp.ui import CSS, I18N, THEME, build_app


def limit_malloc_arenas(n: int = 2) -> bool:
    """Cap glibc's malloc arenas at ``n`` unless ``MALLOC_ARENA_MAX`` is set (glibc then read it itself).

    Gradio serves each request from a pool of threads and glibc gives threads their
    own arenas (up to 8 per core); memory freed in one is not reused by another, so
    the process grew ~35 MB per 16 visitors and kept growing. With 2 arenas it grew
    ~10 MB (bench/load.md). Call before threads start. False where this is not glibc.
    """
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        return ctypes.CDLL("libc.so.6").mallopt(-8, n) == 1  # -8 = M_ARENA_MAX
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to do
        return False


def main(argv: list[str] | None = None) -> None:
    limit_malloc_arenas()
    ap = argparse.ArgumentParser(description="PDF QA web app")
    ap.add_argument("--shared-library", action="store_true", default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--profile", default=None)
    ap.add_argument("--host", default=os.environ.get("HOST", "0.0.0.0"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "7860")))
    ap.add_argument("--no-warmup", action="store_true", help="load the models on first use, not at start")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    s = load_settings(a.profile, data_dir=a.data_dir, shared_library=a.shared_library)
    logging.getLogger("app").info("libraries and runs in %s", s.data_dir.resolve())
    models = Models(s)
    built = build_app(s, models=models)
    demo = built.demo
    if not a.no_warmup:  # load the models in the background: the page is served meanwhile
        threading.Thread(target=models.load, daemon=True, name="warmup").start()
    demo.queue(default_concurrency_limit=4, max_size=256)
    try:
        demo.launch(server_name=a.host, server_port=a.port, css=CSS, theme=THEME, i18n=I18N, show_error=True,
                    footer_links=["gradio"],
                    max_file_size=int(s.limits.max_upload_mb * 2**20),  # Gradio refuses bigger uploads before they land
                    # Gradio keeps every page session's state (~0.1 MB) until this many are held, then drops the oldest
                    state_session_capacity=s.web.max_page_sessions,
                    # a visitor's files to that visitor's browser only (webapp/files.py); file I/O in this process
                    app_kwargs={"middleware": [built.file_guard()]}, num_workers=0)
    finally:
        models.close()


if __name__ == "__main__":
    main()
