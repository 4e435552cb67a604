"""The Gradio Blocks UI: three tabs over per-session libraries, one module each.

``library_tab`` (upload, list, remove), ``ask_tab`` (one question) and
``evaluate_tab`` (runs, traces, comparison) each lay out their components, own
their handlers and wire them; this module puts them together, loads a visitor's
session, and returns the Blocks with the visitors' libraries (:class:`App`).
The logic they show lives in :mod:`webapp.blocks`, :mod:`webapp.runs`,
:mod:`webapp.sessions` and :mod:`webapp.views`.
"""
from __future__ import annotations

import html
import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from pipeline.backends.registry import Models, answer_model_note
from pipeline.errors import QuestionsError
from pipeline.evaluation.questions import read_questions
from pipeline.qa import Pipeline
from pipeline.settings import Settings
from pipeline.types import Question

from . import ask_tab, evaluate_tab, judged_set, library_tab
from .common import Context, bind
from .files import SET_READER_JS, UPLOAD_MINUTES, FileGuard, use_upload_folder
from .sessions import SessionStore, server_key, valid_session_id

log = logging.getLogger(__name__)

STORAGE_KEY = "pdfqa-session"
# system fonts only: the page makes no request outside this server (works offline)
THEME = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"],
                          font_mono=["ui-monospace", "Consolas", "monospace"])
# Gradio's own words where they mislead: the upload areas take many PDFs (or one CSV), not "File"
I18N = gr.I18n(en={"upload_text.drop_file": "Drop here"})
CSS = """
#answer-letter h2 {font-size: 2rem; margin: 0}
.pdfqa-small textarea {font-size: 0.85rem}
#ask-status, #eval-progress {font-weight: 600}
#stale-note {background: #fef3c7; border-radius: 4px}
#evidence-crop img, #evidence-page img {padding-top: 30px; box-sizing: content-box}
#answer {scroll-margin-top: 56px}  /* scrolled to after Answer: the evidence tabs beside it stay in view */
/* the tables are read-only: a selected cell gets no editing frame or handles; its row is tinted instead */
.body-cell.cell-selected {box-shadow: none !important}
.body-cell.cell-solo .cell-wrap > span {box-shadow: none !important; background: transparent !important}
.selection-button, .cell-menu-button {display: none !important}
[role=row]:has(.cell-selected) [role=gridcell] {background: #fff7ed !important}
"""


def browser_state_key(data_dir: Path) -> str:
    """The key Gradio's ``BrowserState`` encrypts the visitor's localStorage value with. It is **public**: Gradio
    sends it to every page (``/config``), which encrypts and decrypts in the browser. It signs nothing, and nothing
    the server trusts is derived from it (that is :func:`webapp.sessions.server_key`); kept in its file so a
    visitor's stored library id still reads after a restart."""
    f = data_dir / ".browser-secret"
    if f.exists() and f.read_text().strip():
        return f.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    s = secrets.token_hex(16)
    f.write_text(s)
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


@dataclass
class App:
    """The built web app: its Blocks (``demo.queue(...).launch(...)``) and the visitors' libraries."""

    demo: gr.Blocks
    store: SessionStore

    def file_guard(self):
        """The middleware that serves a visitor's files to that visitor only (``launch(app_kwargs=...)``)."""
        from starlette.middleware import Middleware

        return Middleware(FileGuard, store=self.store)


@dataclass
class _Page:
    stored: gr.BrowserState
    sid: gr.State
    reader: gr.Textbox  # the token that lets this browser be served its library's files (a cookie: webapp/files.py)
    library: library_tab.LibraryTab
    ask: ask_tab.AskTab
    evaluate: evaluate_tab.EvaluateTab


def on_load(ctx: Context, page: _Page, stored):
    """The visitor's session id (kept in the browser; a fresh one issued unless this server issued the one kept),
    the token for their files, their documents and their saved runs."""
    sid = stored if ctx.store.issued(stored) else ctx.store.new_id()
    lost = library_tab.interrupted(ctx, sid)  # documents the server was reading when it stopped: said once
    if lost:  # the Library's message is below the fold at 1280×720: a toast says it where the eye is
        gr.Warning(f"Not indexed: {html.escape(', '.join(lost))}. The server stopped while reading; upload again.",
                   duration=None)  # (a file name is the visitor's text: shown as text)
    return {page.stored: sid, page.sid: sid, page.reader: ctx.store.reader_token(ctx.store.files_key(sid)),
            **({page.library.message: library_tab.interrupted_text(lost)} if lost else {}),
            **library_tab.library_views(ctx, page.library, sid), **evaluate_tab.runs_choices(ctx, page.evaluate, sid),
            **(evaluate_tab.newest_run(ctx, page.evaluate, sid) or {}), **judged_set.views(ctx, page.evaluate.judged, sid)}


def on_library_page(ctx: Context, page: _Page, sid, pick):
    """The documents as they are now (the sample corpus may have been added from Evaluate), the pick kept."""
    return library_tab.library_views(ctx, page.library, sid, keep=pick) if valid_session_id(sid) else gr.skip()


def on_ask_page(ctx: Context, page: _Page, sid):
    return {page.ask.examples: gr.update(visible=ask_tab.examples_visible(ctx, sid))}


def on_evaluate_page(ctx: Context, page: _Page, sid):
    """The judged questions as they are now (judged in the Ask tab since the page loaded)."""
    return judged_set.views(ctx, page.evaluate.judged, sid) or gr.skip()


def about_model(settings) -> str:
    """The about line's answer model: which file answers and why that format (``shipped.answer_model_note``)."""
    n = answer_model_note(settings)
    return (f"Answer model: {n['model']}" + (f" ({n['format'].upper()}; {n['why']})" if "format" in n else "")
            + (f"; llama.cpp CPU kernels: {n['cpu_kernels']}" if "cpu_kernels" in n else ""))


def _layout(ctx: Context, data_dir: Path) -> tuple[gr.Blocks, _Page, gr.Tab, gr.Tab, gr.Tab]:
    # uploads are deleted once read; one never read (a CSV left unrun) goes within UPLOAD_MINUTES (and a half)
    age = UPLOAD_MINUTES * 60
    with gr.Blocks(title="PDF QA — six-option questions over your PDFs", delete_cache=(age // 2, age)) as demo:
        # Gradio sends this key to every page: it must never be (or sign) anything the server trusts
        stored = gr.BrowserState("", storage_key=STORAGE_KEY, secret=browser_state_key(data_dir))
        sid = gr.State("")
        reader = gr.Textbox(visible=False)
        gr.Markdown("# PDF QA\nAnswers six-option (A–F) questions — or plain questions, with a short answer or "
                    "\"not found\" — from your PDFs, names the document and page, and shows the evidence."
                    + (" *Shared library: everyone sees the same documents.*" if ctx.store.shared
                       else " Your library is private to this browser.") + f" <sub>{about_model(ctx.settings)}</sub>")
        with gr.Tabs():
            with gr.Tab("Library", id="library") as library_page:
                library = library_tab.layout(ctx)
            with gr.Tab("Ask", id="ask") as ask_page:
                ask = ask_tab.layout(ctx)
            with gr.Tab("Evaluate", id="evaluate") as evaluate_page:
                evaluation = evaluate_tab.layout(ctx)
    return demo, _Page(stored, sid, reader, library, ask, evaluation), ask_page, library_page, evaluate_page


def build_app(settings: Settings, *, models: Models | None = None, sample_dir: Path | str = "assets/sample",
              max_open: int = 8) -> App:
    """The web app over ``settings`` (shared library, model concurrency, session limits are settings);
    ``max_open``: visitors' libraries held open at once."""
    models = models or Models(settings)
    data_dir, sample_dir = Path(settings.data_dir), Path(sample_dir)
    use_upload_folder(data_dir)  # <data_dir>/uploads (unless GRADIO_TEMP_DIR says), emptied of an earlier run's
    # uploads return once a document is searchable (BM25); its vectors are added in the background
    store = SessionStore(data_dir, lambda root: Pipeline(settings, root=root, models=models, background=True),
                         shared=settings.web.shared_library, max_sessions=settings.web.max_sessions,
                         max_age_s=settings.web.session_days * 86400, max_open=max_open,
                         secret=server_key(data_dir))
    store.cleanup()
    store.sweep_files()  # files folders of no library (or of keys made before the signing key was the server's own)
    gr.set_static_paths([store.files_root])  # served from there (no copy in Gradio's cache), to their owner only
    ctx = Context(settings, store, sample_dir, sample_questions(sample_dir),
                  dict(concurrency_limit=settings.web.model_concurrency, concurrency_id="model"))
    demo, page, ask_page, library_page, evaluate_page = _layout(ctx, data_dir)
    with demo:
        library_tab.wire(ctx, page.library, page.sid)
        ask_tab.wire(ctx, page.ask, page.sid)
        evaluate_tab.wire(ctx, page.evaluate, page.sid)
        demo.load(bind(on_load, ctx, page), [page.stored],
                  [page.stored, page.sid, *page.library.load_outputs, *page.evaluate.load_outputs, page.reader,
                   page.library.message,
                   *page.evaluate.shown_outputs, *page.evaluate.judged.outputs],
                  api_name="on_load") \
            .then(None, [page.reader], None, js=SET_READER_JS)
        ask_page.select(bind(on_ask_page, ctx, page), [page.sid], [page.ask.examples], queue=False,
                        show_progress="hidden")
        evaluate_page.select(bind(on_evaluate_page, ctx, page), [page.sid], page.evaluate.judged.outputs, queue=False,
                             show_progress="hidden")
        library_page.select(bind(on_library_page, ctx, page), [page.sid, page.library.remove_pick],
                            page.library.load_outputs, queue=False, show_progress="hidden")
    return App(demo, store)
