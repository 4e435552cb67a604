"""The Evaluate tab: run a questions CSV over the library with a progress bar, then the score, a table of
questions filtered by kind of error, one question's trace with predicted and gold pages, downloads, and
the comparison of two saved runs.

:func:`layout` places the components (:class:`EvaluateTab`), the ``on_*`` handlers return
``{component: value}``, :func:`wire` connects them. The CSV is read once, when Run is pressed; Stop
stops the run of the page that started it (:class:`RunStops`), never another page's.
"""
from __future__ import annotations

import html
import json
import logging
import secrets
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import gradio as gr

from pipeline.checks import missing_gold_documents, missing_gold_note
from pipeline.errors import UserError
from pipeline.documents.ingest import list_pdfs, safe_name
from pipeline.evaluation import metric as M
from pipeline.evaluation.free import evaluate_free, is_free_form, read_free_questions
from pipeline.evaluation.questions import read_questions
from pipeline.evaluation.run import evaluate, seconds_summary
from pipeline.qa import Asker
from pipeline.types import LETTERS

from . import judged_set as JS
from . import pictures as P
from . import runs as R
from . import views as V
from .common import QUIET, Context, bind, df, handled, message, need_sid, user_error
from .files import UPLOAD_MINUTES, drop_upload
from .sessions import valid_session_id

log = logging.getLogger(__name__)

DELTA_COLUMNS = ["Metric", "Before", "After", "Change"]
FLIP_COLUMNS = ["ID", "What flipped", "Gold", "Before", "After"]
RANK_COLUMNS = ["Stage", "Gold rank"]
QUESTION_HEADERS = ["ID", "Question", "Ans.", "Gold", "Document", "Gold doc.", "Page", "Gold p.", "Errors", "Order",
                    "s"]
QUESTION_WIDTHS = ["60px", "280px", "50px", "50px", "150px", "150px", "50px", "60px", "180px", "80px", "75px"]
# a free-form run's answers are text ("(not found)", "(unanswerable)", a short answer): wider Ans. and Gold columns,
# so their words are not broken in a letter's 50 px
FREE_QUESTION_WIDTHS = ["60px", "190px", "125px", "145px", "130px", "130px", "50px", "60px", "150px", "80px", "75px"]
# Orders per question when "Check option order" is ticked. The box starts ticked when the settings' order_check
# (PDFQA_ORDER_CHECK) asks for a check, and then checks that many orders; the box decides for each run.
ORDER_CHECKS = 3
PAGE_HEIGHT = 880  # px: an A4 page this tall is about 620 px wide, half the window at 1280
LOST_ANY = [("any stage", ""), *[(s, s) for s in R.STAGES]]


class Stopped(UserError):
    """The visitor pressed Stop: the questions not yet asked are recorded as not asked (:func:`runs.not_asked`)."""


class RunStops:
    """One Stop flag per run, not per visitor: a page's Run makes a token (kept in that page's state), its Stop
    sets that token's flag only, and the flag goes when the run ends. Two pages of one visitor run apart."""

    def __init__(self):
        self._flags: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def start(self) -> str:
        token = secrets.token_hex(8)
        with self._lock:
            self._flags[token] = threading.Event()
        return token

    def flag(self, token: str) -> threading.Event:
        """The run's flag (a set one for a token that is gone: such a run has nothing left to do)."""
        with self._lock:
            got = self._flags.get(token)
        if got is None:
            got = threading.Event()
            got.set()
        return got

    def stop(self, token: str) -> None:
        with self._lock:
            got = self._flags.get(token)
        if got is not None:
            got.set()

    def finish(self, token: str) -> None:
        with self._lock:
            self._flags.pop(token, None)

    def __len__(self) -> int:
        return len(self._flags)


class Stoppable:
    """An :class:`~pipeline.qa.Asker` for one run: once ``stop`` is set, every question still to come fails at
    once (the one being answered is finished)."""

    def __init__(self, pipe: Asker, stop: threading.Event):
        self.pipe, self.stop, self.settings, self.library = pipe, stop, pipe.settings, pipe.library

    def _check(self) -> None:
        if self.stop.is_set():
            raise Stopped("stopped by the user: not asked")

    def search(self, q):
        self._check()
        return self.pipe.search(q)

    def ask(self, q, on_stage=None, **kw):
        self._check()
        return self.pipe.ask(q, on_stage, **kw)


@dataclass
class EvaluateTab:
    saved: gr.Markdown  # the saved runs, named at the top
    sample_btn: gr.Button
    csv_in: gr.File
    run_name: gr.Textbox
    check_order: gr.Checkbox
    run_btn: gr.Button
    stop_btn: gr.Button
    progress: gr.HTML
    message: gr.Markdown
    results_box: gr.Column  # the score, pictures and downloads: hidden until a run is shown
    table_box: gr.Column  # the error filter and the question table: likewise
    trace_box: gr.Column  # one question's pages, ranks, chart and trace: hidden until a question is picked
    compare_box: gr.Column  # the comparison's pictures and tables: hidden until two runs are compared
    score_md: gr.Markdown
    score_plot: gr.BarPlot
    reliability: gr.HTML
    losses: gr.HTML
    lost_stage: gr.Dropdown
    lost_doc: gr.Dropdown
    sub_dl: gr.DownloadButton
    trace_dl: gr.DownloadButton
    kind: gr.Radio
    qtable: gr.Dataframe
    q_head: gr.Markdown
    pred_img: gr.Image
    gold_img: gr.Image
    ranks: gr.Dataframe
    q_probs: gr.BarPlot
    trace_code: gr.Code
    run_a: gr.Dropdown
    run_b: gr.Dropdown
    open_btn: gr.Button
    delete_btn: gr.Button
    delete_ok: gr.Textbox
    compare_btn: gr.Button
    compare_md: gr.Markdown
    compare_pics: gr.HTML
    deltas: gr.Dataframe
    flips: gr.Dataframe
    shown: gr.State  # the name of the run shown
    parsed: gr.State  # the CSV read when Run was pressed: (questions, problems, free-form)
    token: gr.State  # this page's run (its Stop flag in ``stops``)
    judged: JS.JudgedSet  # the visitor's judged questions: a ready set, listed
    stops: RunStops = field(default_factory=RunStops)

    @property
    def load_outputs(self) -> list:
        return [self.run_a, self.run_b, self.saved]

    @property
    def shown_outputs(self) -> list:
        """What :func:`run_views` sets (a saved run shown)."""
        return self.run_outputs[1:]

    @property
    def run_outputs(self) -> list:
        return [self.message, self.score_md, self.score_plot, self.kind, self.qtable, self.shown, self.sub_dl,
                self.trace_dl, self.reliability, self.losses, self.lost_stage, self.lost_doc, self.results_box,
                self.table_box]

    @property
    def cleared(self) -> list:
        """What :func:`no_run` empties."""
        return [self.score_md, self.score_plot, self.reliability, self.losses, self.qtable, self.shown, self.sub_dl,
                self.trace_dl, self.results_box, self.table_box]

    @property
    def trace_parts(self) -> list:
        return [self.q_head, self.trace_code, self.pred_img, self.gold_img, self.ranks, self.q_probs, self.trace_box]

    @property
    def compared(self) -> list:
        """What :func:`on_compare` sets and :func:`on_pick` empties."""
        return [self.compare_md, self.compare_pics, self.deltas, self.flips, self.compare_box]


def _run_controls(ctx: Context) -> dict:
    got = {"saved": gr.Markdown(elem_id="saved-runs", latex_delimiters=[])}  # at the top, where a person looks
    with gr.Row():
        got["csv_in"] = gr.File(label="Questions CSV: six-option (the competition's format) or free-form "
                                      "(Question_ID, Question[, Answer, Doc_ID, Page_Num]; an empty Answer = "
                                      "unanswerable)", file_types=[".csv"], elem_id="questions-csv", scale=2)
        with gr.Column(scale=1):
            got["run_name"] = gr.Textbox(label="Run name (optional)", elem_id="run-name")
            n = ctx.settings.answer.order_check if ctx.settings.answer.order_check > 1 else ORDER_CHECKS
            got["check_order"] = gr.Checkbox(label=f"Check option order ({n} orders per question; the Order column "
                                                   "and filter)", value=ctx.settings.answer.order_check > 1,
                                             elem_id="check-order")
            with gr.Row():
                got["run_btn"] = gr.Button("Run", variant="primary", elem_id="run")
                got["stop_btn"] = gr.Button("Stop", variant="stop", elem_id="stop", interactive=False)
            got["sample_btn"] = gr.Button("Run the sample questions (adds the sample PDFs to the library)",
                                          elem_id="run-sample", size="sm")
            judged = JS.buttons()
    got["judged"] = JS.list_layout(judged)
    got["progress"] = gr.HTML(elem_id="eval-progress")
    got["message"] = gr.Markdown(elem_id="eval-message", latex_delimiters=[])
    with gr.Column(visible=False, elem_id="results-box") as got["results_box"]:
        with gr.Row():
            got["score_md"] = gr.Markdown(elem_id="score", latex_delimiters=[])
            got["score_plot"] = gr.BarPlot(None, x="part", y="value", y_lim=[0, 1], label="Score and its parts",
                                           elem_id="score-plot", height=240)
        with gr.Row():
            got["reliability"] = gr.HTML(elem_id="reliability", js_on_load=None)
            got["losses"] = gr.HTML(elem_id="losses", js_on_load=P.CLICK_JS)
        with gr.Row():
            got["sub_dl"] = gr.DownloadButton("Download submission.csv", elem_id="download-submission",
                                              interactive=False)
            got["trace_dl"] = gr.DownloadButton("Download trace.jsonl", elem_id="download-trace", interactive=False)
    return got


def _trace_views(ctx: Context) -> dict:
    """The per-question table and one question's trace. The page captions are above the images (the question's
    head names both pages), not laid over them, where they hid the top lines of the page."""
    got = {}
    with gr.Column(visible=False, elem_id="table-box") as got["table_box"]:
        with gr.Row():
            got["kind"] = gr.Radio([(k, k) for k in M.KINDS], value=M.ALL, label="Show", elem_id="error-kind", scale=3)
            got["lost_stage"] = gr.Dropdown(LOST_ANY, value="", label="Gold page lost at (or click a bar above)",
                                            elem_id="lost-stage", scale=1)
            got["lost_doc"] = gr.Dropdown([("any document", "")], value="", label="Gold document",
                                          elem_id="lost-doc", scale=1)
        got["qtable"] = gr.Dataframe(df([], QUESTION_HEADERS), label="Questions — select a row for its trace",
                                     interactive=False, elem_id="question-table", wrap=True, max_height=420,
                                     column_widths=QUESTION_WIDTHS)
    got["q_head"] = gr.Markdown(elem_id="question-head", latex_delimiters=[])
    with gr.Column(visible=False, elem_id="trace-box") as got["trace_box"]:
        with gr.Row():  # each page as wide as half the window (about 600 px at 1280): its text readable
            got["pred_img"] = gr.Image(label="Predicted page", type="pil", format="png", interactive=False,
                                       elem_id="trace-predicted", height=PAGE_HEIGHT, show_label=False)
            got["gold_img"] = gr.Image(label="Gold page", type="pil", format="png", interactive=False,
                                       elem_id="trace-gold", height=PAGE_HEIGHT, show_label=False)
        with gr.Row():
            got["ranks"] = gr.Dataframe(df([], RANK_COLUMNS), label="Gold page's rank per stage", interactive=False,
                                        elem_id="gold-ranks")
            got["q_probs"] = gr.BarPlot(None, x="option", y="probability", y_lim=[0, 1],
                                        label=V.chart_title(ctx.settings.answer.scorer), sort="x",
                                        elem_id="question-probabilities", height=240)
        got["trace_code"] = gr.Code(label="Trace", language="json", elem_id="trace", max_lines=30)
    return got


def _compare_views() -> dict:
    got = {}
    gr.Markdown("### Compare two saved runs")
    with gr.Row():
        got["run_a"] = gr.Dropdown(label="Before (older run)", choices=[], elem_id="run-a")
        got["run_b"] = gr.Dropdown(label="After (newer run)", choices=[], elem_id="run-b")
        with gr.Column():
            got["open_btn"] = gr.Button("Open the after run", elem_id="open-run")
            got["compare_btn"] = gr.Button("Compare before → after", elem_id="compare")
            got["delete_btn"] = gr.Button("Delete the after run", elem_id="delete-run", variant="stop", size="sm")
    got["delete_ok"] = gr.Textbox(visible=False)  # the answer to "Delete this run?": "yes" or "no"
    got["compare_md"] = gr.Markdown(elem_id="compare-summary", latex_delimiters=[])
    with gr.Column(visible=False, elem_id="compare-box") as got["compare_box"]:
        got["compare_pics"] = gr.HTML(elem_id="compare-pictures", js_on_load=None)
        got["deltas"] = gr.Dataframe(df([], DELTA_COLUMNS), label="Score changes", interactive=False,
                                     elem_id="deltas")
        got["flips"] = gr.Dataframe(df([], FLIP_COLUMNS), label="Questions that flipped (answer, document or page)",
                                    interactive=False, elem_id="flips", wrap=True)
    return got


def layout(ctx: Context) -> EvaluateTab:
    return EvaluateTab(shown=gr.State(""), parsed=gr.State(None), token=gr.State(""),
                       **_run_controls(ctx), **_trace_views(ctx), **_compare_views())


# ---- helpers -------------------------------------------------------------------------------------
def runs_choices(ctx: Context, ui: EvaluateTab, sid: str) -> dict:
    """The two run pickers' choices: the newest run as "after", the one before it as "before". With one run it is
    "after" only (a run is never offered as compared with itself), and the pickers say that two are needed."""
    names = R.list_runs(ctx.store.runs_dir(sid))
    return {ui.run_a: gr.update(choices=names, value=names[1] if len(names) > 1 else None,
                                info="" if len(names) > 1 else need_two(names, md=False)),
            ui.run_b: gr.update(choices=names, value=names[0] if names else None), ui.saved: saved_line(names)}


def need_two(names: list[str], md: bool = True) -> str:
    """Why runs cannot be compared yet: comparing needs two saved runs, and how many there are (``md``: as
    Markdown, the name escaped; else plain text, for a picker's note)."""
    one = (V.md_escape(names[0]) if md else names[0]) if names else ""
    have = "there is none yet" if not names else f"there is one, “{one}”" if len(names) == 1 else \
        f"there are {len(names)}"
    return f"Comparing needs two saved runs; {have}."


def compare_refusal(names: list[str], a, b) -> str:
    """Why runs ``a`` → ``b`` cannot be compared ("" when they can; Markdown, names escaped): said beside the
    buttons, never raised (an error would mark the pickers and the summary "Error")."""
    if len(names) < 2:
        return need_two(names) + f" Run {'another' if names else 'a'} questions CSV (or the sample questions) first."
    if not a or not b:
        return "Pick two saved runs: Before and After."
    if a == b:
        return f"Before and After are the same run (“{V.md_escape(a)}”): pick two different saved runs."
    gone = next((n for n in (a, b) if n not in names), None)
    return f"There is no saved run “{V.md_escape(gone)}” (deleted?): pick another." if gone else ""


def saved_line(names: list[str], most: int = 8) -> str:
    """The saved runs, newest first, named at the top of the tab ("" when there is none)."""
    if not names:
        return ""
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return (f"**Saved runs** (newest first): {', '.join(V.md_escape(n) for n in names[:most])}{more}. Open or "
            "compare any of them under *Compare two saved runs* at the bottom.")


def newest_run(ctx: Context, ui: EvaluateTab, sid: str) -> dict | None:
    """The newest saved run's views (a reload shows it again); None when there is none (a helper merged into the
    page's load, not a handler's output)."""
    names = R.list_runs(ctx.store.runs_dir(sid)) if valid_session_id(sid) else []
    try:
        return run_views(ctx, ui, sid, names[0]) if names else None
    except (OSError, ValueError, KeyError) as e:  # a damaged run must not stop the page loading
        log.warning("the newest run %s not shown: %s", names[0], e)
        return None


def _missing_note(ctx: Context, sid, questions: list) -> str:
    if not ctx.store.exists(sid):
        return ""
    with ctx.store.open(sid) as pipe:
        names = [d.name for d in pipe.library.documents()]
    return missing_gold_note(missing_gold_documents(questions, names), len(questions))


def shown_metrics(run: dict) -> tuple[dict, int]:
    """A run's metrics as shown, and how many questions it did not ask (a stopped run): its seconds per question
    are then those of the questions it asked (the not-asked took none: they made the median 0.0 s)."""
    skipped = sum(1 for t in run["traces"] if R.not_asked(t))
    m = dict(run["metrics"])
    if skipped:
        for k in ("p50_seconds", "p95_seconds"):
            m.pop(k, None)
        m.update(seconds_summary([t for t in run["traces"] if not R.not_asked(t)]))
    return m, skipped


def kind_choices(traces: list[dict], skipped: int) -> list[tuple[str, str]]:
    """The error filter's choices with their counts (a stopped run's not-asked questions are among the failed)."""
    counts = M.kind_counts(traces)
    name = lambda k: "failed or not asked" if k == M.FAILED and skipped else k  # noqa: E731
    return [(f"{name(k)} ({counts[k]})", k) for k in M.kinds_for(traces)]


def run_views(ctx: Context, ui: EvaluateTab, sid, name) -> dict:
    """A saved run's score, question table and downloads."""
    run = R.load_run(ctx.store.runs_dir(sid), name)
    qs = [SimpleNamespace(gold_doc=q.get("gold_doc")) for q in run["questions"].values()]
    m, skipped = shown_metrics(run)
    d = run["dir"]
    titles = _titles(ctx, sid)
    reliability, losses = P.run_pictures(run, titles)
    groups = R.loss_groups(run["traces"], titles, most=50, questions=run["questions"])
    docs = [(g["group"], g["doc"]) for g in groups[1:]]
    widths = FREE_QUESTION_WIDTHS if M.is_free_run(run["traces"]) else QUESTION_WIDTHS
    return {ui.score_md: V.metrics_markdown(m, name, _missing_note(ctx, sid, qs), not_asked=skipped),
            ui.score_plot: V.metrics_frame(run["metrics"]),
            ui.kind: gr.update(choices=kind_choices(run["traces"], skipped), value=M.ALL),
            ui.qtable: gr.update(value=df(JS.marked(R.question_rows(run["traces"], run["questions"], titles),
                                                    JS.judged_after(ctx, sid, run)), QUESTION_HEADERS),
                                 column_widths=widths),
            ui.shown: name,
            ui.sub_dl: gr.update(value=ctx.files.download(sid, name, d / "submission.csv"), interactive=True),
            ui.trace_dl: gr.update(value=ctx.files.download(sid, name, d / "trace.jsonl"), interactive=True),
            ui.reliability: reliability, ui.losses: losses, ui.lost_stage: gr.update(value=""),
            ui.lost_doc: gr.update(choices=[("any document", ""), *docs], value=""),
            ui.results_box: gr.update(visible=True), ui.table_box: gr.update(visible=True)}


def _titles(ctx: Context, sid) -> dict[str, str]:
    """File name → title of the library's documents (the Library's names for them)."""
    titles: dict[str, str] = {}
    if ctx.store.exists(sid):
        with ctx.store.open(sid) as pipe:
            titles = V.titles_of(pipe.library)
    return titles


def read_csv(ctx: Context, csv_file) -> tuple[list, list, bool]:
    """(questions, problems, free): a CSV without option columns holds free-form questions. The upload is
    deleted once read (the run keeps what was read)."""
    if not csv_file:
        raise user_error("Upload a questions CSV first.")
    try:
        data = Path(csv_file).read_bytes()
    except FileNotFoundError:
        raise user_error("The uploaded CSV is no longer here (an upload is read once, and kept "
                         f"{UPLOAD_MINUTES} minutes at most): upload it again.") from None
    finally:
        drop_upload(csv_file)
    try:
        free = is_free_form(data)
        read = read_free_questions if free else read_questions
        return (*read(data, max_questions=ctx.settings.limits.max_questions), free)
    except UserError as e:
        log.info("evaluation run: %s: %s", type(e).__name__, e)
        raise user_error(str(e)) from None


def no_trace(ui: EvaluateTab) -> dict:
    """The question trace emptied: it belonged to the run shown before."""
    return {ui.q_head: "", ui.trace_code: "", ui.pred_img: gr.update(value=None, label="Predicted page"),
            ui.gold_img: gr.update(value=None, label="Gold page"), ui.ranks: df([], RANK_COLUMNS), ui.q_probs: None,
            ui.trace_box: gr.update(visible=False)}


# ---- a run ---------------------------------------------------------------------------------------
def on_validate(ctx: Context, ui: EvaluateTab, sid, csv_file):
    """The fast first step: the CSV read (once: the run takes it from here; the upload is deleted and the field
    emptied). A mistake is said beside Run, and nothing is read (``parsed`` None: :func:`on_go` stops there); it
    never raises (an error would mark its outputs "Error", or keep an earlier run's ``parsed``)."""
    read = False
    try:
        need_sid(sid)
        if not ctx.store.exists(sid):  # before the CSV is read: it stays for when the PDFs are in
            log.info("evaluation run: empty library")
            raise user_error("The library is empty: add the PDFs on the Library tab first.")
        read = True
        return {ui.parsed: read_csv(ctx, csv_file), ui.csv_in: None}
    except Exception as e:
        said = html.unescape(str(e.message)) if isinstance(e, gr.Error) else message(e, "reading the questions CSV")
        return {ui.parsed: None, ui.message: f"⚠ **Not run:** {V.md_escape(said, 600)}",
                **({ui.csv_in: None} if read and csv_file else {})}


def on_sample_questions(ctx: Context, ui: EvaluateTab, sid):
    """"Run the sample questions": the sample corpus's PDFs the library lacks added (as the Library tab's "Load
    the sample corpus"), then its questions read for the run; like :func:`on_validate`, a problem is said beside
    Run and it never raises."""
    try:
        need_sid(sid)
        pdfs = list_pdfs(ctx.sample_dir) if ctx.sample_dir.is_dir() else []
        csv_path = ctx.sample_dir / "questions.csv"
        if not pdfs or not csv_path.is_file():
            raise user_error(f"No sample corpus found in {ctx.sample_dir}/.")
        with ctx.store.open(sid) as pipe:
            have = {d.name for d in pipe.library.documents()}
            new = [p for p in pdfs if safe_name(p.name) not in have]
            for p in new:
                pipe.add_pdf(p.read_bytes(), p.name)
        questions, problems = read_questions(csv_path.read_bytes(), max_questions=ctx.settings.limits.max_questions)
        added = f"{V.plural(len(new), 'sample PDF')} added to the library" if new else "the sample PDFs are in the library"
        return {ui.parsed: (questions, problems, False), ui.message: f"Sample questions: {added}."}
    except Exception as e:
        said = html.unescape(str(e.message)) if isinstance(e, gr.Error) else message(e, "loading the sample corpus")
        return {ui.parsed: None, ui.message: f"⚠ **Not run:** {V.md_escape(said, 600)}"}


def on_go(parsed):
    """Stops the run's chain after a refusal, which is said beside Run already: the one error raised outside the
    queue on purpose (Gradio's page shows nothing of it, and it has no outputs to mark; see common.QUIET)."""
    if parsed is None:
        raise user_error("not run", toast=False)


def no_run(ui: EvaluateTab) -> dict:
    """The run shown before emptied (its score, pictures, table and downloads): a new run is under way."""
    return {ui.score_md: "", ui.score_plot: None, ui.reliability: "", ui.losses: "", ui.qtable: df([], QUESTION_HEADERS),
            ui.shown: "", ui.sub_dl: gr.update(value=None, interactive=False),
            ui.trace_dl: gr.update(value=None, interactive=False), ui.results_box: gr.update(visible=False),
            ui.table_box: gr.update(visible=False)}


def on_start(ui: EvaluateTab, parsed):
    """The progress bar at 0, a busy Run button, Stop enabled for this run, the last run's results cleared (they
    read as this run's otherwise)."""
    n = len(parsed[0])
    return {ui.progress: V.progress_html(0, n, 0.0, "waiting for the model…"), ui.token: ui.stops.start(),
            ui.run_btn: gr.update(interactive=False, value="Running…"), ui.stop_btn: gr.update(interactive=True),
            ui.message: f"Starting a run of {V.plural(n, 'question')}…", **no_trace(ui), **no_run(ui)}


STOPPING = "stopping: the question under way is finished first (a question is not cut short), then the rest are not asked"
STOPPED = "stopped: the question under way was finished first (a question is not cut short), the rest not asked"


def on_stop(ui: EvaluateTab, token):
    ui.stops.stop(token)
    return {ui.stop_btn: gr.update(interactive=False, value="Stopping after this question…")}


def _work(ctx: Context, pipe, parsed, out: Path, stop: threading.Event, order: bool):
    questions, _, free = parsed
    n_orders = ctx.settings.answer.order_check if ctx.settings.answer.order_check > 1 else ORDER_CHECKS
    run_pipe = Stoppable(pipe, stop)
    if free:
        return lambda report: evaluate_free(run_pipe, questions, out, progress=report)
    return lambda report: evaluate(run_pipe, questions, out, progress=report, orders=n_orders if order else 0)


@handled("the evaluation run")
def on_run(ctx: Context, ui: EvaluateTab, sid, parsed, name, order, token):
    questions, problems, _ = parsed
    stop = ui.stops.flag(token)
    runs_dir = ctx.store.runs_dir(sid)
    name = R.unique_run_name(runs_dir, R.clean_run_name(name))
    notes = "".join(f"\n- {V.md_escape(p)}" for p in problems[:20])
    t0, done, n, failed, t_last = time.perf_counter(), 0, len(questions), "", 0.0
    try:
        with ctx.store.open(sid) as pipe:
            R.save_questions(runs_dir / name, questions)
            for kind, val in V.stream(_work(ctx, pipe, parsed, runs_dir / name, stop, order), tick=1.0):
                if kind == "error":
                    raise user_error(f"The run failed: {message(val, 'the evaluation run')}")
                if kind == "done":
                    failed = V.failed_text([t for t in val[1] if not R.not_asked(t)])
                    continue
                now = time.perf_counter() - t0
                if kind == "progress" and val[0] != done:
                    done, t_last = val[0], now
                stage = STOPPING if stop.is_set() else f"question {done + 1}" if done < n else ""
                left = None if stop.is_set() else V.time_left(done, n, now, t_last)
                yield {ui.progress: V.progress_html(done, n, now, stage, left),
                       ui.message: f"Run “{V.md_escape(name)}”: {done}/{n} questions answered"
                                   f"{'; ' + STOPPING if stop.is_set() else ''}{notes}"}
    finally:
        ui.stops.finish(token)
    asked = sum(1 for t in R.load_run(runs_dir, name)["traces"] if not R.not_asked(t))
    how = (f"stopped after {asked} of {V.plural(n, 'question')} (the {n - asked} not asked count as wrong in "
           f"the score)" if asked < n else f"finished: {V.plural(n, 'question')}")
    stage = STOPPED if asked < n else "done"  # said after the run too: a fast question may finish before Stop shows
    yield {ui.progress: V.progress_html(asked, n, time.perf_counter() - t0, stage),
           **run_views(ctx, ui, sid, name), ui.message: f"Run “{V.md_escape(name)}” {how}{failed}.{notes}",
           **runs_choices(ctx, ui, sid), **on_pick(ui)}  # the pickers changed: a comparison shown is of others


def on_finish(ui: EvaluateTab, token):
    ui.stops.finish(token)  # a run that failed before it began leaves no flag behind
    return {ui.run_btn: gr.update(interactive=True, value="Run"), ui.stop_btn: gr.update(interactive=False, value="Stop")}


# ---- saved runs ------------------------------------------------------------------------------------
@handled("opening a run")
def on_open_run(ctx: Context, ui: EvaluateTab, sid, name):
    need_sid(sid)
    if not name:  # said, never raised: an error would mark the results and the message "Error"
        none = not R.list_runs(ctx.store.runs_dir(sid))
        return {ui.message: "⚠ There is no saved run to open." if none else "⚠ Pick a saved run (After) first."}
    return {ui.message: f"Opened run {V.md_escape(name)}.", **run_views(ctx, ui, sid, name), **no_trace(ui)}


def filtered_table(ctx: Context, sid, name, kind, stage="", doc=""):
    """The question table of run ``name``: questions of error ``kind``, lost at ``stage``, of gold document ``doc``."""
    run = R.load_run(ctx.store.runs_dir(sid), name)
    shown = R.filter_lost(M.filter_traces(run["traces"], kind), stage or "", doc or "", run["questions"])
    return df(JS.marked(R.question_rows(shown, run["questions"], _titles(ctx, sid)), JS.judged_after(ctx, sid, run)),
              QUESTION_HEADERS)


@handled("filtering a run")
def on_filter(ctx: Context, ui: EvaluateTab, sid, name, kind, stage, doc):
    if not name or not valid_session_id(sid):
        return gr.skip()  # no change (an empty dict is not read as one by Gradio)
    return {ui.qtable: filtered_table(ctx, sid, name, kind, stage, doc)}


@handled("filtering a run")
def on_loss_click(ctx: Context, ui: EvaluateTab, sid, name, kind, evt: gr.EventData):
    """A bar of "where the gold page was lost" clicked: the table lists its questions (the two pickers say so)."""
    stage, doc = getattr(evt, "_data", {}).get("stage", ""), getattr(evt, "_data", {}).get("doc", "")
    if not name or not valid_session_id(sid) or stage not in R.STAGES:
        return gr.skip()  # no change (an empty dict is not read as one by Gradio)
    return {ui.lost_stage: stage, ui.lost_doc: doc, ui.qtable: filtered_table(ctx, sid, name, kind, stage, doc)}


def question_head(rec: dict, q: dict, pred_label: str, gold_label: str) -> str:
    head = f"**Question {V.md_escape(rec['Question_ID'])}:** {V.md_escape(q.get('text', ''), 500)}"
    if q.get("options"):
        head += "".join(f"  \n{L}) {V.md_escape(o, 200)}" for L, o in zip(LETTERS, q["options"]))
    kinds = M.error_kinds(rec)
    head += f"\n\n{'; '.join(kinds) if kinds else 'no errors' if rec.get('gold') else 'no gold to compare with'}"
    return head + f"\n\n**Left:** {V.md_escape(pred_label)}  \n**Right:** {V.md_escape(gold_label)}"


@handled("showing a question's trace")
def on_question(ctx: Context, ui: EvaluateTab, sid, name, evt: gr.SelectData):
    need_sid(sid)
    row = evt.row_value or []
    if not name or not row:
        return gr.skip()  # no change (an empty dict is not read as one by Gradio)
    run = R.load_run(ctx.store.runs_dir(sid), name)
    rec = next((t for t in run["traces"] if t["Question_ID"] == str(row[0])), None)
    if rec is None:
        return no_trace(ui)
    pred = gold = None
    pred_label, gold_label = "Predicted page", "Gold page"
    if ctx.store.exists(sid):
        with ctx.store.open(sid) as pipe:
            try:
                pred, pred_label, gold, gold_label = V.trace_pages(pipe.library, rec)
            except (ValueError, FileNotFoundError) as e:
                log.info("trace pages not shown: %s", e)
            docs = [V.doc_hash_by_name(pipe.library, d) for d in (rec.get("doc"), (rec.get("gold") or {}).get("doc"))]
        pred, gold = (ctx.files.image(sid, img, h) for img, h in zip((pred, gold), docs))
    return {ui.q_head: question_head(rec, run["questions"].get(rec["Question_ID"], {}), pred_label, gold_label),
            ui.trace_code: json.dumps(V.trace_for_display(rec), ensure_ascii=False, indent=1),
            ui.pred_img: gr.update(value=pred, label=pred_label), ui.gold_img: gr.update(value=gold, label=gold_label),
            ui.ranks: df(V.rank_rows(rec), RANK_COLUMNS), ui.q_probs: V.probs_frame(rec.get("probabilities") or {}),
            ui.trace_box: gr.update(visible=True)}


@handled("comparing runs")
def on_compare(ctx: Context, ui: EvaluateTab, sid, a, b):
    need_sid(sid)
    if why := compare_refusal(R.list_runs(ctx.store.runs_dir(sid)), a, b):
        return {**on_pick(ui), ui.compare_md: f"⚠ {why}"}
    c = M.compare_runs(R.load_run(ctx.store.runs_dir(sid), a), R.load_run(ctx.store.runs_dir(sid), b),
                       not_asked=R.not_asked)
    r3 = lambda v: round(v, 3) if isinstance(v, (int, float)) else v  # noqa: E731
    rows = [[f["Question_ID"], f"{f['what']} {f['change']}", f["gold"], f["A"], f["B"]] for f in c["flips"]]
    ra, rb = (P.run_pictures(R.load_run(ctx.store.runs_dir(sid), n), _titles(ctx, sid), n) for n in (a, b))
    return {ui.compare_md: V.compare_markdown(a, b, c), ui.compare_pics: P.side_by_side(ra[0], rb[0])
            + P.side_by_side(ra[1], rb[1]),
            ui.deltas: df([[d["metric"], r3(d["A"]), r3(d["B"]), r3(d["B − A"])] for d in c["deltas"]], DELTA_COLUMNS),
            ui.flips: df(rows, FLIP_COLUMNS), ui.compare_box: gr.update(visible=True)}


CONFIRM_DELETE = ("(sid, name, _, shown) => [sid, name, (!name || window.confirm('Delete the run ' + name + '? "
                  "Its results and downloads are deleted.')) ? 'yes' : 'no', shown]")


@handled("deleting a run")
def on_delete_run(ctx: Context, ui: EvaluateTab, sid, name, confirmed, shown):
    """The run picked as "after" deleted, with its downloads. The run shown, when it was that one, gives way to the
    newest run left (nothing is left blank while runs remain); beside the buttons, what runs are left. Nothing
    to delete is said there too, never raised (an error would mark the pickers and the message "Error")."""
    need_sid(sid)
    if confirmed != "yes":  # "Cancel" in the confirmation
        return gr.skip()  # no change (an empty dict is not read as one by Gradio)
    names = R.list_runs(ctx.store.runs_dir(sid))
    if not names or not name or name not in names:
        why = ("There is no saved run to delete." if not names else "Pick a saved run (After) first." if not name
               else f"There is no saved run “{V.md_escape(name)}” (deleted already?).")
        return {**on_pick(ui), **runs_choices(ctx, ui, sid), ui.compare_md: f"⚠ {why}"}
    d = R.run_dir(ctx.store.runs_dir(sid), name)
    shutil.rmtree(d, ignore_errors=True)
    ctx.files.drop_run(sid, name)
    left = R.list_runs(ctx.store.runs_dir(sid))
    said = f"Deleted run {V.md_escape(name)}."
    out = {**runs_choices(ctx, ui, sid), **on_pick(ui), ui.compare_md: left_text(name, left)}
    if shown == name:
        out.update({**no_trace(ui), ui.progress: ""})
        try:
            out.update(run_views(ctx, ui, sid, left[0]) if left else no_run(ui))
            said += f" Shown: run {V.md_escape(left[0])}, the newest left." if left else " No saved run is left."
        except (OSError, ValueError, KeyError) as e:  # a damaged run left: emptied, as before
            log.warning("the run %s not shown: %s", left[0], e)
            out.update(no_run(ui))
        if not left:
            out[ui.kind] = gr.update(choices=[(k, k) for k in M.KINDS], value=M.ALL)
    return {**out, ui.message: said}


def left_text(name: str, left: list[str]) -> str:
    """What a deletion leaves, said beside the buttons: the runs left, or that comparing needs two."""
    said = f"Deleted run “{V.md_escape(name)}”. "
    if not left:
        return said + "No saved run is left."
    runs = ", ".join(f"“{V.md_escape(n)}”" for n in left[:8]) + (f" and {len(left) - 8} more" if len(left) > 8 else "")
    return said + (f"Saved runs left (newest first): {runs}." if len(left) > 1 else
                   f"One saved run is left, {runs}: comparing needs two.")


def on_pick(ui: EvaluateTab):
    """A comparison shown is of the runs it names: picking others clears it."""
    return {ui.compare_md: "", ui.compare_pics: "", ui.deltas: df([], DELTA_COLUMNS), ui.flips: df([], FLIP_COLUMNS),
            ui.compare_box: gr.update(visible=False)}


def _then_run(ctx: Context, ui: EvaluateTab, sid: gr.State, first) -> None:
    """After a step that sets ``parsed`` (a CSV read, or the sample's questions): the run, unless it was refused."""
    quiet = QUIET
    first.then(on_go, [ui.parsed], None, **quiet) \
        .success(bind(on_start, ui), [ui.parsed], [ui.progress, ui.token, ui.run_btn, ui.stop_btn, ui.message,
                                                   *ui.trace_parts, *ui.cleared], **quiet) \
        .success(bind(on_run, ctx, ui), [sid, ui.parsed, ui.run_name, ui.check_order, ui.token],
                 [ui.progress, *ui.run_outputs, *ui.load_outputs, *ui.compared], show_progress="hidden",
                 **ctx.model_work) \
        .then(bind(on_finish, ui), [ui.token], [ui.run_btn, ui.stop_btn], **quiet)


def wire(ctx: Context, ui: EvaluateTab, sid: gr.State) -> None:
    quiet = QUIET  # see common.QUIET: on_validate says a refusal and never raises; on_go only stops the chain
    for first in (ui.run_btn.click(bind(on_validate, ctx, ui), [sid, ui.csv_in], [ui.parsed, ui.message, ui.csv_in],
                                   **quiet),
                  ui.sample_btn.click(bind(on_sample_questions, ctx, ui), [sid], [ui.parsed, ui.message],
                                      show_progress_on=[ui.message], **ctx.model_work),
                  *(btn.click(bind(JS.on_run_set, ctx, free, ui.parsed, ui.message), [sid], [ui.parsed, ui.message],
                              **quiet)
                    for btn, free in ((ui.judged.run_options, False), (ui.judged.run_free, True)))):
        _then_run(ctx, ui, sid, first)
    JS.wire(ctx, ui.judged, sid)
    ui.stop_btn.click(bind(on_stop, ui), [ui.token], [ui.stop_btn], **quiet)
    ui.open_btn.click(bind(on_open_run, ctx, ui), [sid, ui.run_b], [*ui.run_outputs, *ui.trace_parts])
    ui.delete_btn.click(bind(on_delete_run, ctx, ui), [sid, ui.run_b, ui.delete_ok, ui.shown],
                        [*ui.run_outputs, *ui.load_outputs, *ui.compared, *ui.trace_parts, ui.progress],
                        js=CONFIRM_DELETE)
    ui.kind.change(bind(on_filter, ctx, ui), [sid, ui.shown, ui.kind, ui.lost_stage, ui.lost_doc], [ui.qtable])
    for pick in (ui.lost_stage, ui.lost_doc):
        pick.input(bind(on_filter, ctx, ui), [sid, ui.shown, ui.kind, ui.lost_stage, ui.lost_doc], [ui.qtable])
    ui.losses.click(bind(on_loss_click, ctx, ui), [sid, ui.shown, ui.kind], [ui.lost_stage, ui.lost_doc, ui.qtable])
    ui.qtable.select(bind(on_question, ctx, ui), [sid, ui.shown], ui.trace_parts)
    compared = ui.compared
    ui.compare_btn.click(bind(on_compare, ctx, ui), [sid, ui.run_a, ui.run_b], compared)
    for pick in (ui.run_a, ui.run_b):  # a person's pick; a handler that sets the pickers clears it itself (on_run)
        pick.input(bind(on_pick, ui), None, compared, **quiet)
