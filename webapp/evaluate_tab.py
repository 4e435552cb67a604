"""The Evaluate tab: run a questions CSV over the library with a progress bar, then the score, a table of
questions filtered by kind of error, one question's trace with predicted and gold pages, downloads, and
the comparison of two saved runs."""
from __future__ import annotations

import json
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from pipeline.evaluation import metric as M
from pipeline.evaluation.questions import read_questions
from pipeline.evaluation.run import evaluate
from pipeline.types import LETTERS

from . import runs as R
from . import views as V
from .common import Context, df, handled, message, need_sid, user_error
from .sessions import valid_session_id

log = logging.getLogger(__name__)

DELTA_COLUMNS = ["Metric", "A", "B", "B − A"]
FLIP_COLUMNS = ["Question_ID", "change", "gold", "A answer", "B answer", "A document", "B document"]


@dataclass
class EvaluateTab:
    run_a: gr.Dropdown
    run_b: gr.Dropdown

    @property
    def load_outputs(self) -> list:
        return [self.run_a, self.run_b]


def runs_choices(ctx: Context, sid: str):
    """The two run pickers' choices: the newest run as A, the one before as B."""
    names = R.list_runs(ctx.store.runs_dir(sid))
    return gr.update(choices=names, value=names[0] if names else None), \
        gr.update(choices=names, value=names[1] if len(names) > 1 else None)


def _download_copy(path: Path) -> str:
    """A copy of a run's file in a fresh temp folder (what Gradio then serves)."""
    d = Path(tempfile.mkdtemp(prefix="pdfqa-dl-"))
    return str(shutil.copy(path, d / path.name))


def build(ctx: Context, sid: gr.State) -> EvaluateTab:
    store = ctx.store
    run_state = gr.State("")
    with gr.Row():
        csv_in = gr.File(label="Questions CSV (competition format; gold columns optional)", file_types=[".csv"],
                         elem_id="questions-csv", scale=2)
        with gr.Column(scale=1):
            run_name = gr.Textbox(label="Run name (optional)", elem_id="run-name")
            run_btn = gr.Button("Run", variant="primary", elem_id="run")
    eval_msg = gr.Markdown(elem_id="eval-message", latex_delimiters=[])
    with gr.Row():
        score_md = gr.Markdown(elem_id="score", latex_delimiters=[])
        score_plot = gr.BarPlot(None, x="part", y="value", y_lim=[0, 1], label="Score and its parts",
                                elem_id="score-plot", height=240)
    with gr.Row():
        sub_dl = gr.DownloadButton("Download submission.csv", elem_id="download-submission")
        trace_dl = gr.DownloadButton("Download trace.jsonl", elem_id="download-trace")
    kind = gr.Radio([(k, k) for k in M.KINDS], value=M.ALL, label="Show", elem_id="error-kind")
    qtable = gr.Dataframe(df([], R.QUESTION_COLUMNS), label="Questions — select a row for its trace",
                          interactive=False, elem_id="question-table", wrap=True, max_height=420)
    q_head = gr.Markdown(elem_id="question-head", latex_delimiters=[])
    with gr.Row():
        with gr.Column(scale=1):
            ranks = gr.Dataframe(df([], ["Stage", "Gold rank"]), label="Gold page's rank per stage",
                                 interactive=False, elem_id="gold-ranks")
            q_probs = gr.BarPlot(None, x="option", y="probability", y_lim=[0, 1], label="Letter probabilities",
                                 sort="x", elem_id="question-probabilities", height=240)
        with gr.Column(scale=2):
            gr.Markdown("**Predicted page** (left, its top candidate highlighted) and **gold page** "
                        "(right, the best-ranked candidate on it highlighted)")
            pages = gr.Image(label="Predicted page | gold page", show_label=False, type="pil", format="png",
                             interactive=False, elem_id="trace-pages", height=600)
    trace_code = gr.Code(label="Trace", language="json", elem_id="trace", max_lines=30)
    gr.Markdown("### Compare two saved runs")
    with gr.Row():
        run_a = gr.Dropdown(label="Run A", choices=[], elem_id="run-a")
        run_b = gr.Dropdown(label="Run B", choices=[], elem_id="run-b")
        with gr.Column():
            open_btn = gr.Button("Open run A", elem_id="open-run")
            compare_btn = gr.Button("Compare A → B", elem_id="compare")
    compare_md = gr.Markdown(elem_id="compare-summary", latex_delimiters=[])
    deltas = gr.Dataframe(df([], DELTA_COLUMNS), label="Score deltas", interactive=False, elem_id="deltas")
    flips = gr.Dataframe(df([], FLIP_COLUMNS), label="Questions that flipped", interactive=False, elem_id="flips")

    def run_outputs(sid, name):
        run = R.load_run(store.runs_dir(sid), name)
        counts = M.kind_counts(run["traces"])
        radio = gr.update(choices=[(f"{k} ({counts[k]})", k) for k in M.KINDS], value=M.ALL)
        table = df(R.question_rows(run["traces"], run["questions"]), R.QUESTION_COLUMNS)
        d = run["dir"]
        return (V.metrics_markdown(run["metrics"], name), V.metrics_frame(run["metrics"]), radio, table, name,
                _download_copy(d / "submission.csv"), _download_copy(d / "trace.jsonl"))

    @handled("the evaluation run")
    def on_run(sid, csv_file, name, progress=gr.Progress()):
        need_sid(sid)
        if not csv_file:
            raise user_error("Upload a questions CSV first.")
        questions, problems = read_questions(Path(csv_file).read_bytes(), max_questions=ctx.settings.max_questions)
        if not store.exists(sid):
            raise user_error("The library is empty: add the PDFs on the Library tab first.")
        runs_dir = store.runs_dir(sid)
        name = R.unique_run_name(runs_dir, R.clean_run_name(name))
        out = runs_dir / name
        notes = "".join(f"\n- {V.md_escape(p)}" for p in problems[:20])
        skip = [gr.skip()] * 9
        with store.open(sid) as pipe:
            R.save_questions(out, questions)
            progress((0, len(questions)), desc="answering")
            failed = ""
            for kind, val in V.stream(lambda report: evaluate(pipe, questions, out, progress=report)):
                if kind == "progress":
                    done, n, rec = val
                    progress((done, n), desc=f"question {rec['Question_ID']}")
                    yield f"Run {V.md_escape(name)}: {done}/{n} questions answered{notes}", *skip
                elif kind == "error":
                    raise user_error(f"The run failed: {message(val, 'the evaluation run')}")
                else:
                    failed = V.failed_text(val[1])
        yield (f"Run {V.md_escape(name)} finished: {V.plural(len(questions), 'question')}{failed}.{notes}",
               *run_outputs(sid, name), *runs_choices(ctx, sid))

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
        return df(R.question_rows(M.filter_traces(run["traces"], kind), run["questions"]), R.QUESTION_COLUMNS)

    @handled("showing a question's trace")
    def on_question(sid, name, evt: gr.SelectData):
        need_sid(sid)
        row = evt.row_value or []
        if not name or not row:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        run = R.load_run(store.runs_dir(sid), name)
        rec = next((t for t in run["traces"] if t["Question_ID"] == str(row[0])), None)
        if rec is None:
            return "", None, None, None, ""
        img = None
        if store.exists(sid):
            with store.open(sid) as pipe:
                try:
                    img = V.trace_pages_image(pipe.library, rec)
                except (ValueError, FileNotFoundError) as e:
                    log.info("trace pages not shown: %s", e)
        q = run["questions"].get(rec["Question_ID"], {})
        head = f"**Question {V.md_escape(rec['Question_ID'])}:** {V.md_escape(q.get('text', ''), 500)}"
        if q.get("options"):
            head += "".join(f"  \n{L}) {V.md_escape(o, 200)}" for L, o in zip(LETTERS, q["options"]))
        kinds = M.error_kinds(rec)
        head += f"\n\n{'; '.join(kinds) if kinds else 'no errors' if rec.get('gold') else 'no gold to compare with'}"
        return (head, json.dumps(V.trace_for_display(rec), ensure_ascii=False, indent=1), img,
                df(V.rank_rows(rec), ["Stage", "Gold rank"]), V.probs_frame(rec.get("probabilities") or {}))

    @handled("comparing runs")
    def on_compare(sid, a, b):
        need_sid(sid)
        if not a or not b:
            raise user_error("Pick two saved runs.")
        ra, rb = R.load_run(store.runs_dir(sid), a), R.load_run(store.runs_dir(sid), b)
        c = M.compare_runs(ra, rb)
        delta_rows = df([[d["metric"], d["A"], d["B"], d["B − A"]] for d in c["deltas"]], DELTA_COLUMNS)
        flip_rows = df([[f[k] for k in FLIP_COLUMNS] for f in c["flips"]], FLIP_COLUMNS)
        summary = (f"A = {V.md_escape(a)}, B = {V.md_escape(b)}: {c['fixed']} fixed (wrong in A, right in B), "
                   f"{c['broken']} broken (right in A, wrong in B)")
        return summary, delta_rows, flip_rows

    run_btn.click(on_run, [sid, csv_in, run_name],
                  [eval_msg, score_md, score_plot, kind, qtable, run_state, sub_dl, trace_dl, run_a, run_b],
                  show_progress_on=[eval_msg], **ctx.model_work)
    open_btn.click(on_open_run, [sid, run_a], [eval_msg, score_md, score_plot, kind, qtable, run_state, sub_dl, trace_dl])
    kind.change(on_filter, [sid, run_state, kind], [qtable])
    qtable.select(on_question, [sid, run_state], [q_head, trace_code, pages, ranks, q_probs])
    compare_btn.click(on_compare, [sid, run_a, run_b], [compare_md, deltas, flips])
    return EvaluateTab(run_a, run_b)
