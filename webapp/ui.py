"""The Gradio Blocks UI: three tabs over per-session libraries, one module each.

``library_tab`` (upload, list, remove), ``ask_tab`` (one question) and
``evaluate_tab`` (runs, traces, comparison) build their blocks and own their
handlers; this module puts them together and loads a visitor's session.
The logic they show lives in :mod:`webapp.blocks`, :mod:`webapp.runs`,
:mod:`webapp.sessions` and :mod:`webapp.views`.
"""
from __future__ import annotations

import logging
import secrets
from pathlib import Path

import gradio as gr

from pipeline.backends.registry import Models
from pipeline.errors import QuestionsError
from pipeline.evaluation.questions import read_questions
from pipeline.qa import Pipeline
from pipeline.settings import Settings
from pipeline.types import Question

from . import ask_tab, evaluate_tab, library_tab
from .common import Context
from .sessions import SessionStore, new_session_id, valid_session_id

log = logging.getLogger(__name__)

STORAGE_KEY = "pdfqa-session"
# system fonts only: the page makes no request outside this server (works offline)
THEME = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"],
                          font_mono=["ui-monospace", "Consolas", "monospace"])
CSS = """
#answer-letter h2 {font-size: 2rem; margin: 0}
.pdfqa-small textarea {font-size: 0.85rem}
#ask-status, #eval-progress {font-weight: 600}
"""


def browser_secret(data_dir: Path) -> str:
    """The key that seals the session id in the browser's localStorage; kept so it survives restarts."""
    f = data_dir / ".browser-secret"
    if f.exists() and f.read_text().strip():
        return f.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    s = secrets.token_hex(16)
    f.write_text(s)
    f.chmod(0o600)
    return s


def sample_questions(sample_dir: Path) -> list[Question]:
    f = sample_dir / "questions.csv"
    if not f.exists():
        return []
    try:
        return read_questions(f.read_bytes())[0]
    except (QuestionsError, OSError) as e:
        log.warning("sample questions not read: %s", e)
        return []


def build_app(settings: Settings, *, models: Models | None = None, shared: bool = False,
              sample_dir: Path | str = "assets/sample", model_concurrency: int = 1,
              max_sessions: int = 200, max_age_s: float = 7 * 86400, max_open: int = 8) -> gr.Blocks:
    models = models or Models(settings)
    data_dir, sample_dir = Path(settings.data_dir), Path(sample_dir)
    # uploads return once a document is searchable (BM25); its vectors are added in the background
    store = SessionStore(data_dir, lambda root: Pipeline(settings, root=root, models=models, background=True),
                         shared=shared,
                         max_sessions=max_sessions, max_age_s=max_age_s, max_open=max_open)
    store.cleanup()
    ctx = Context(settings, store, sample_dir, sample_questions(sample_dir),
                  dict(concurrency_limit=model_concurrency, concurrency_id="model"))

    with gr.Blocks(title="PDF QA — six-option questions over your PDFs", delete_cache=(3600, 6 * 3600)) as demo:
        stored = gr.BrowserState("", storage_key=STORAGE_KEY, secret=browser_secret(data_dir))
        sid = gr.State("")
        gr.Markdown("# PDF QA\nAnswers six-option (A–F) questions — or plain questions, with a short answer or "
                    "\"not found\" — from your PDFs, names the document and page, and shows the evidence."
                    + (" *Shared library: everyone sees the same documents.*" if shared
                       else " Your library is private to this browser."))
        with gr.Tabs():
            with gr.Tab("Library", id="library"):
                library = library_tab.build(ctx, sid)
            with gr.Tab("Ask", id="ask") as ask_page:
                examples = ask_tab.build(ctx, sid)
            with gr.Tab("Evaluate", id="evaluate"):
                evaluation = evaluate_tab.build(ctx, sid)

        def on_load(stored):
            sid = stored if valid_session_id(stored) else new_session_id()
            return sid, sid, *library_tab.library_views(ctx, sid), *evaluate_tab.runs_choices(ctx, sid)

        demo.load(on_load, [stored], [stored, sid, *library.load_outputs, *evaluation.load_outputs])
        ask_page.select(lambda sid: gr.update(visible=ask_tab.examples_visible(ctx, sid)), [sid], [examples],
                        queue=False, show_progress="hidden")
    demo.pdfqa_store = store  # for tests and maintenance
    return demo
