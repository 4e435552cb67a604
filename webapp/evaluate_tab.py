"""The Evaluate tab: run a questions CSV over the library with a progress bar, then the score, a table of
questions filtered by kind of error, one question's trace with predicted and gold pages, downloads, and
the comparison of two saved runs."""
from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
import time
from types import SimpleNamespace
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from pipeline.checks import missing_gold_documents, missing_gold_note
from pipeline.errors import UserError
from pipeline.evaluation import metric as M
from pipeline.evaluation.free import evaluate_free, is_free_form, read_free_questions
from pipeline.evaluation.questions import read_questions
from pipeline.evaluation.run import evaluate
from pipeline.types import LETTERS

from . import runs as R
from . import views as V
from .common import Context, df, handled, message, need_sid, user_error
from .sessions import valid_session_id

log = logging.getLogger(__name__)

DELTA_COLUMNS = ["Metric", "Before", "After", "Change"]
FLIP_COLUMNS = ["ID", "What flipped", "Gold", "Before", "After"]


class Stopped(UserError):
    """The visitor pressed Stop: the questions not yet asked are recorded as not asked."""


class _Stoppable:
    """The pipeline for one run: once ``stop`` is set every question still to come fails at once;
    ``order_check`` is this run's (the settings' ``order_check``, the rest shared)."""

    def __init__(self, pipe, stop: threading.Event, order_check: int = 0):
        self._pipe, self._stop = pipe, stop
        self.settings = pipe.settings.model_copy(update={"order_check": order_check})

    def __getattr__(self, name):
        return getattr(self._pipe, name)

    def retrieve(self, q):
        if self._stop.is_set():
            raise Stopped("stopped by the user: not asked")
        return self._pipe.retrieve(q)


def _right(value, gold) -> bool | None:
    return None if gold in (None, "") else str(value or "") == str(gold)


def flip_rows(a: dict, b: dict) -> list[list]:
    """Questions in both runs whose answer, document or page went from wrong to right or back."""
    bt = {t["Question_ID"]: t for t in b["traces"]}
    rows = []
    for ta in a["traces"]:
        tb = bt.get(ta["Question_ID"])
        gold = ta.get("gold") or {}
        if tb is None:
            continue
        for what, key in (("answer", "answer"), ("document", "doc"), ("page", "page")):
            if what == "answer":  # a letter, or a free-form answer (right: token F1 >= 0.5, or "not found")
                ra, rb = M.answer_right(ta), M.answer_right(tb)
            else:
                ra, rb = _right(ta.get(key), gold.get(key)), _right(tb.get(key), gold.get(key))
            if ra is None:
                if what == "answer" and ta.get(key) != tb.get(key):
                    rows.append([ta["Question_ID"], "answer changed", "", ta.get(key) or "", tb.get(key) or ""])
            elif ra != rb:
                rows.append([ta["Question_ID"], f"{what} {'fixed' if rb else 'broken'}", gold.get(key),
                             ta.get(key) or "", tb.get(key) or ""])
    return rows


@dataclass
class EvaluateTab:
    run_a: gr.Dropdown
    run_b: gr.Dropdown

    @property
    def load_outputs(self) -> list:
        return [self.run_a, self.run_b]


def runs_choices(ctx: Context, sid: str):
    """The two run pickers' choices: the newest run as "after", the one before it as "before"."""
    names = R.list_runs(ctx.store.runs_dir(sid))
    return gr.update(choices=names, value=names[1] if len(names) > 1 else (names[0] if names else None)), \
        gr.update(choices=names, value=names[0] if names else None)


def _download_copy(path: Path) -> str:
    """A copy of a run's file in a fresh temp folder (what Gradio then serves)."""
    d = Path(tempfile.mkdtemp(prefix="pdfqa-dl-"))
    return str(shutil.copy(path, d / path.name))


QUESTION_HEADERS = ["ID", "Question", "Ans.", "Gold", "Document", "Gold doc.", "Page", "Gold p.", "Errors", "Order",
                    "s"]
QUESTION_WIDTHS = ["60px", "280px", "50px", "50px", "150px", "150px", "50px", "55px", "180px", "80px", "60px"]
ORDER_CHECKS = 3  # orders per question when the run checks the option order


def build(ctx: Context, sid: gr.State) -> EvaluateTab:
    store = ctx.store
    run_state = gr.State("")
    stops: dict[str, threading.Event] = {}  # one Stop per visitor
    with gr.Row():
        csv_in = gr.File(label="Questions CSV: six-option (the competition's format) or free-form (Question_ID, "
                               "Question[, Answer, Doc_ID, Page_Num]; an empty Answer = unanswerable)",
                         file_types=[".csv"], elem_id="questions-csv", scale=2)
        with gr.Column(scale=1):
            run_name = gr.Textbox(label="Run name (optional)", elem_id="run-name")
            check_order = gr.Checkbox(label=f"Check option order ({ORDER_CHECKS} orders per question; the "
                                            "Order column and filter)", value=False, elem_id="check-order")
            with gr.Row():
                run_btn = gr.Button("Run", variant="primary", elem_id="run")
                stop_btn = gr.Button("Stop", variant="stop", elem_id="stop", interactive=False)
    progress_html = gr.HTML(elem_id="eval-progress")
    eval_msg = gr.Markdown(elem_id="eval-message", latex_delimiters=[])
    with gr.Row():
        score_md = gr.Markdown(elem_id="score", latex_delimiters=[])
        score_plot = gr.BarPlot(None, x="part", y="value", y_lim=[0, 1], label="Score and its parts",
                                elem_id="score-plot", height=240)
    with gr.Row():
        sub_dl = gr.DownloadButton("Download submission.csv", elem_id="download-submission", interactive=False)
        trace_dl = gr.DownloadButton("Download trace.jsonl", elem_id="download-trace", interactive=False)
    kind = gr.Radio([(k, k) for k in M.KINDS], value=M.ALL, label="Show", elem_id="error-kind")
    qtable = gr.Dataframe(df([], QUESTION_HEADERS), label="Questions — select a row for its trace",
                          interactive=False, elem_id="question-table", wrap=True, max_height=420,
                          column_widths=QUESTION_WIDTHS)
    q_head = gr.Markdown(elem_id="question-head", latex_delimiters=[])
    with gr.Row():
        pred_img = gr.Image(label="Predicted page", type="pil", format="png", interactive=False,
                            elem_id="trace-predicted", height=560)
        gold_img = gr.Image(label="Gold page", type="pil", format="png", interactive=False, elem_id="trace-gold",
                            height=560)
    with gr.Row():
        ranks = gr.Dataframe(df([], ["Stage", "Gold rank"]), label="Gold page's rank per stage",
                             interactive=False, elem_id="gold-ranks")
        q_probs = gr.BarPlot(None, x="option", y="probability", y_lim=[0, 1],
                             label=V.scorer_title(None, ctx.settings.scorer), sort="x",
                             elem_id="question-probabilities", height=240)
    trace_code = gr.Code(label="Trace", language="json", elem_id="trace", max_lines=30)
    gr.Markdown("### Compare two saved runs")
    with gr.Row():
        run_a = gr.Dropdown(label="Before (older run)", choices=[], elem_id="run-a")
        run_b = gr.Dropdown(label="After (newer run)", choices=[], elem_id="run-b")
        with gr.Column():
            open_btn = gr.Button("Open the after run", elem_id="open-run")
            compare_btn = gr.Button("Compare before → after", elem_id="compare")
    compare_md = gr.Markdown(elem_id="compare-summary", latex_delimiters=[])
    deltas = gr.Dataframe(df([], DELTA_COLUMNS), label="Score changes", interactive=False, elem_id="deltas")
    flips = gr.Dataframe(df([], FLIP_COLUMNS), label="Questions that flipped (answer, document or page)",
                         interactive=False, elem_id="flips", wrap=True)

    def missing_note(sid, questions: list) -> str:
        if not store.exists(sid):
            return ""
        with store.open(sid) as pipe:
            names = [d.name for d in pipe.library.documents()]
        return missing_gold_note(missing_gold_documents(questions, names), len(questions))

    def run_outputs(sid, name):
        run = R.load_run(store.runs_dir(sid), name)
        counts = M.kind_counts(run["traces"])
        radio = gr.update(choices=[(f"{k} ({counts[k]})", k) for k in M.kinds_for(run["traces"])], value=M.ALL)
        table = df(R.question_rows(run["traces"], run["questions"]), QUESTION_HEADERS)
        qs = [SimpleNamespace(gold_doc=q.get("gold_doc")) for q in run["questions"].values()]
        d = run["dir"]
        return (V.metrics_markdown(run["metrics"], name, missing_note(sid, qs)), V.metrics_frame(run["metrics"]),
                radio, table, name, gr.update(value=_download_copy(d / "submission.csv"), interactive=True),
                gr.update(value=_download_copy(d / "trace.jsonl"), interactive=True))

    def read_csv(csv_file):
        """(questions, problems, free): a CSV without option columns holds free-form questions."""
        if not csv_file:
            raise user_error("Upload a questions CSV first.")
        try:
            data = Path(csv_file).read_bytes()
            free = is_free_form(data)
            read = read_free_questions if free else read_questions
            return (*read(data, max_questions=ctx.settings.max_questions), free)
        except UserError as e:
            log.info("evaluation run: %s: %s", type(e).__name__, e)
            raise user_error(str(e)) from None

    def on_validate(sid, csv_file):
        """The fast first step (no outputs): a mistake shows a message only, nothing else changes."""
        need_sid(sid)
        read_csv(csv_file)
        if not store.exists(sid):
            log.info("evaluation run: empty library")
            raise user_error("The library is empty: add the PDFs on the Library tab first.")

    def no_trace():
        """The question trace emptied: it belonged to the run shown before."""
        return ("", "", gr.update(value=None, label="Predicted page"), gr.update(value=None, label="Gold page"),
                df([], ["Stage", "Gold rank"]), None)

    def on_start(sid, csv_file):
        """The progress bar at 0, a busy Run button, Stop enabled, the last run's question trace cleared."""
        questions, _, _ = read_csv(csv_file)
        stops[sid] = threading.Event()
        return (V.progress_html(0, len(questions), 0.0, "waiting for the model…"),
                gr.update(interactive=False, value="Running…"), gr.update(interactive=True),
                f"Starting a run of {V.plural(len(questions), 'question')}…", *no_trace())

    def on_stop(sid):
        if sid in stops:
            stops[sid].set()
        return gr.update(interactive=False, value="Stopping…")

    @handled("the evaluation run")
    def on_run(sid, csv_file, name, order=False):
        questions, problems, free = read_csv(csv_file)
        stop = stops.setdefault(sid, threading.Event())
        runs_dir = store.runs_dir(sid)
        name = R.unique_run_name(runs_dir, R.clean_run_name(name))
        out = runs_dir / name
        notes = "".join(f"\n- {V.md_escape(p)}" for p in problems[:20])
        skip = [gr.skip()] * 9
        t0, done, n, failed = time.perf_counter(), 0, len(questions), ""
        with store.open(sid) as pipe:
            R.save_questions(out, questions)
            run_pipe = _Stoppable(pipe, stop, order_check=ORDER_CHECKS if order and not free else 0)
            run = evaluate_free if free else evaluate
            work = lambda report: run(run_pipe, questions, out, progress=report)  # noqa: E731
            for kind, val in V.stream(work, tick=1.0):
                if kind in ("progress", "tick"):
                    if kind == "progress":
                        done, n, rec = val
                    stage = "stopping…" if stop.is_set() else f"question {done + 1}" if done < n else ""
                    yield V.progress_html(done, n, time.perf_counter() - t0, stage), \
                        f"Run {V.md_escape(name)}: {done}/{n} questions answered{notes}", *skip
                elif kind == "error":
                    raise user_error(f"The run failed: {message(val, 'the evaluation run')}")
                else:
                    failed = V.failed_text([t for t in val[1] if not str(t.get("error", "")).startswith("Stopped")])
        asked = sum(1 for t in R.load_run(runs_dir, name)["traces"] if not str(t.get("error", "")).startswith("Stopped"))
        how = (f"stopped after {asked} of {V.plural(n, 'question')} (the {n - asked} not asked count as failed in "
               f"the score)" if asked < n else f"finished: {V.plural(n, 'question')}")
        yield (V.progress_html(asked, n, time.perf_counter() - t0, "stopped" if asked < n else "done"),
               f"Run {V.md_escape(name)} {how}{failed}.{notes}", *run_outputs(sid, name), *runs_choices(ctx, sid))

    def on_finish():
        return gr.update(interactive=True, value="Run"), gr.update(interactive=False, value="Stop")

    @handled("opening a run")
    def on_open_run(sid, name):
        need_sid(sid)
        if not name:
            raise user_error("Pick a saved run first.")
        return f"Opened run {V.md_escape(name)}.", *run_outputs(sid, name)

    @handled("filtering a run")
    def on_filter(sid, name, kind):
        if not name or not valid_session_id(sid):
            return gr.skip()
        run = R.load_run(store.runs_dir(sid), name)
        return df(R.question_rows(M.filter_traces(run["traces"], kind), run["questions"]), QUESTION_HEADERS)

    @handled("showing a question's trace")
    def on_question(sid, name, evt: gr.SelectData):
        need_sid(sid)
        row = evt.row_value or []
        if not name or not row:
            return [gr.skip()] * 6
        run = R.load_run(store.runs_dir(sid), name)
        rec = next((t for t in run["traces"] if t["Question_ID"] == str(row[0])), None)
        if rec is None:
            return no_trace()
        pred = gold = None
        pred_label, gold_label = "Predicted page", "Gold page"
        if store.exists(sid):
            with store.open(sid) as pipe:
                try:
                    pred, pred_label, gold, gold_label = V.trace_pages(pipe.library, rec)
                except (ValueError, FileNotFoundError) as e:
                    log.info("trace pages not shown: %s", e)
        q = run["questions"].get(rec["Question_ID"], {})
        head = f"**Question {V.md_escape(rec['Question_ID'])}:** {V.md_escape(q.get('text', ''), 500)}"
        if q.get("options"):
            head += "".join(f"  \n{L}) {V.md_escape(o, 200)}" for L, o in zip(LETTERS, q["options"]))
        kinds = M.error_kinds(rec)
        head += f"\n\n{'; '.join(kinds) if kinds else 'no errors' if rec.get('gold') else 'no gold to compare with'}"
        head += f"\n\n**Left:** {V.md_escape(pred_label)}  \n**Right:** {V.md_escape(gold_label)}"
        return (head, json.dumps(V.trace_for_display(rec), ensure_ascii=False, indent=1),
                gr.update(value=pred, label=pred_label), gr.update(value=gold, label=gold_label),
                df(V.rank_rows(rec), ["Stage", "Gold rank"]), V.probs_frame(rec.get("probabilities") or {}))

    @handled("comparing runs")
    def on_compare(sid, a, b):
        need_sid(sid)
        if not a or not b:
            raise user_error("Pick two saved runs.")
        ra, rb = R.load_run(store.runs_dir(sid), a), R.load_run(store.runs_dir(sid), b)
        c = M.compare_runs(ra, rb)
        r3 = lambda v: round(v, 3) if isinstance(v, (int, float)) else v  # noqa: E731
        delta_rows = df([[d["metric"], r3(d["A"]), r3(d["B"]), r3(d["B − A"])] for d in c["deltas"]], DELTA_COLUMNS)
        rows = flip_rows(ra, rb)
        summary = (f"Before = {V.md_escape(a)}, after = {V.md_escape(b)}: {c['fixed']} fixed (wrong before, right "
                   f"after), {c['broken']} broken (right before, wrong after); {V.plural(len(rows), 'flip')} "
                   "of answer, document or page listed below")
        return summary, delta_rows, df(rows, FLIP_COLUMNS)

    trace_parts = [q_head, trace_code, pred_img, gold_img, ranks, q_probs]
    run_btn.click(on_validate, [sid, csv_in], None, show_progress="hidden") \
        .success(on_start, [sid, csv_in], [progress_html, run_btn, stop_btn, eval_msg, *trace_parts], queue=False,
                 show_progress="hidden") \
        .success(on_run, [sid, csv_in, run_name, check_order],
                 [progress_html, eval_msg, score_md, score_plot, kind, qtable, run_state, sub_dl, trace_dl, run_a,
                  run_b], show_progress="hidden", **ctx.model_work) \
        .then(on_finish, None, [run_btn, stop_btn], queue=False, show_progress="hidden")
    stop_btn.click(on_stop, [sid], [stop_btn], queue=False, show_progress="hidden")
    open_btn.click(on_open_run, [sid, run_b], [eval_msg, score_md, score_plot, kind, qtable, run_state, sub_dl, trace_dl]) \
        .success(no_trace, None, trace_parts, queue=False, show_progress="hidden")
    kind.change(on_filter, [sid, run_state, kind], [qtable])
    qtable.select(on_question, [sid, run_state], [q_head, trace_code, pred_img, gold_img, ranks, q_probs])
    compare_btn.click(on_compare, [sid, run_a, run_b], [compare_md, deltas, flips])
    for pick in (run_a, run_b):  # a comparison shown is of the runs it names: picking others clears it
        pick.change(lambda: ("", df([], DELTA_COLUMNS), df([], FLIP_COLUMNS)), None, [compare_md, deltas, flips],
                    queue=False, show_progress="hidden")
    return EvaluateTab(run_a, run_b)
