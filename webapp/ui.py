"""The Gradio Blocks UI: three tabs (Library, Ask, Evaluate) over per-session libraries.

Handlers stay thin: the logic lives in :mod:`webapp.blocks`, :mod:`webapp.runs`,
:mod:`webapp.sessions` and :mod:`webapp.views`.
"""
from __future__ import annotations

import html
import logging
import secrets
import shutil
import tempfile
from pathlib import Path

import gradio as gr
import pandas as pd

from pipeline.answer import LETTERS
from pipeline.evaluate import QuestionsError, evaluate, read_questions
from pipeline.ingest import IngestError, check_size, safe_name
from pipeline.qa import Models, Pipeline
from pipeline.remote import BackendError
from pipeline.settings import Settings
from pipeline.types import Question

from . import runs as R
from . import views as V
from .blocks import BlockError, parse_block
from .sessions import SessionStore, new_session_id, valid_session_id

log = logging.getLogger(__name__)

STORAGE_KEY = "pdfqa-session"
# system fonts only: the page makes no request outside this server (works offline)
THEME = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"],
                          font_mono=["ui-monospace", "Consolas", "monospace"])
DELTA_COLUMNS = ["Metric", "A", "B", "B − A"]
FLIP_COLUMNS = ["Question_ID", "change", "gold", "A answer", "B answer", "A document", "B document"]
CSS = """
#answer-letter h2 {font-size: 2rem; margin: 0}
.pdfqa-small textarea {font-size: 0.85rem}
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


def _df(rows: list[list], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns)


def _error(message: str) -> gr.Error:
    """A user-facing error; Gradio shows its message as HTML, so it is escaped."""
    return gr.Error(html.escape(message))


def _need_sid(sid: str) -> str:
    if not valid_session_id(sid):
        raise _error("This page has no session yet (still loading) or no longer (open a long time while many others "
                     "came): wait a moment, or reload the page — your library is kept.")
    return sid


def _download_copy(path: Path) -> str:
    """A copy of a run's file in a fresh temp folder (what Gradio then serves)."""
    d = Path(tempfile.mkdtemp(prefix="pdfqa-dl-"))
    return str(shutil.copy(path, d / path.name))


def build_app(settings: Settings, *, models: Models | None = None, shared: bool = False,
              sample_dir: Path | str = "assets/sample", model_concurrency: int = 1,
              max_sessions: int = 200, max_age_s: float = 7 * 86400, max_open: int = 8) -> gr.Blocks:
    models = models or Models(settings)
    data_dir = Path(settings.data_dir)
    sample_dir = Path(sample_dir)
    store = SessionStore(data_dir, lambda root: Pipeline(settings, root=root, models=models), shared=shared,
                         max_sessions=max_sessions, max_age_s=max_age_s, max_open=max_open)
    store.cleanup()
    examples = sample_questions(sample_dir)
    model_work = dict(concurrency_limit=model_concurrency, concurrency_id="model")

    # ---- helpers -----------------------------------------------------------------
    def documents(sid: str) -> list:
        if not store.exists(sid):
            return []
        with store.open(sid) as pipe:
            return pipe.library.documents()

    def library_views(sid: str):
        docs = documents(sid)
        return _df(V.doc_rows(docs), V.DOC_COLUMNS), gr.update(choices=V.doc_choices(docs), value=None)

    def runs_choices(sid: str):
        names = R.list_runs(store.runs_dir(sid))
        return gr.update(choices=names, value=names[0] if names else None), \
            gr.update(choices=names, value=names[1] if len(names) > 1 else None)

    # ---- library -------------------------------------------------------------------
    def index_files(sid: str, items: list[tuple[str, Path]]):
        """Index (name, path) pairs one by one, yielding the status table as each moves on."""
        status = [[name, "queued", ""] for name, _ in items]
        no_change = (gr.skip(), gr.skip(), gr.skip())
        yield _df(status, V.STATUS_COLUMNS), *no_change
        if not items:
            return
        with store.open(sid) as pipe:
            for i, (name, path) in enumerate(items):
                try:  # the size is checked before the file is read
                    check_size(name, path.stat().st_size, settings.max_upload_mb)
                    data = path.read_bytes()
                except (IngestError, OSError) as e:
                    why = V.failure_text(name, e) if isinstance(e, IngestError) else \
                        f"the file could not be read ({e.strerror or e})"
                    status[i][1:] = ["failed", why]
                    yield _df(status, V.STATUS_COLUMNS), *no_change
                    continue
                for kind, val in V.stream(lambda report, data=data, name=name: pipe.add_pdf(data, name, progress=report)):
                    if kind == "progress":
                        status[i][1] = V.stage_text(*val)
                    elif kind == "done":
                        warn = f"; {'; '.join(val.warnings)}" if val.warnings else ""
                        same = f"same file as {val.name}; " if val.duplicate and val.name != safe_name(name) else ""
                        status[i][1:] = ["already in the library" if val.duplicate else "indexed",
                                         f"{same}{V.plural(val.n_pages, 'page')}, {V.plural(val.n_chunks, 'chunk')}{warn}"]
                    elif isinstance(val, IngestError):
                        status[i][1:] = ["failed", V.failure_text(name, val)]
                    else:
                        log.error("indexing %s failed", name, exc_info=val)
                        status[i][1:] = ["failed", f"unexpected error: {type(val).__name__}: {val}"]
                    yield _df(status, V.STATUS_COLUMNS), *no_change
        yield _df(status, V.STATUS_COLUMNS), *library_views(sid), None  # the upload box is emptied for the next files

    def on_upload(files, sid):
        _need_sid(sid)
        items = [(Path(f).name, Path(f)) for f in (files or [])]
        yield from index_files(sid, items)

    def on_sample(sid):
        _need_sid(sid)
        pdfs = sorted(sample_dir.glob("*.pdf"))
        if not pdfs:
            raise _error(f"No sample corpus found in {sample_dir}/.")
        yield from index_files(sid, [(p.name, p) for p in pdfs])

    def on_remove(doc_hash, sid):
        _need_sid(sid)
        if not doc_hash:
            raise _error("Pick a document to remove first.")
        with store.open(sid) as pipe:
            info = pipe.library.find(doc_hash)
            pipe.library.remove(doc_hash)
        msg = f"Removed {V.md_escape(info.name)}." if info else "That document was already gone."
        return msg, *library_views(sid)

    # ---- session ---------------------------------------------------------------------
    def on_load(stored):
        sid = stored if valid_session_id(stored) else new_session_id()
        docs_df, choices = library_views(sid)
        run_a, run_b = runs_choices(sid)
        return sid, sid, docs_df, choices, run_a, run_b

    # ---- ask ---------------------------------------------------------------------------
    def on_fill(block):
        try:
            p = parse_block(block)
        except BlockError as e:
            raise _error(str(e)) from None
        note = ("Filled. " + "; ".join(p.notes)) if p.notes else "Filled."
        return p.question, *p.options, note

    def on_example(index):
        q = examples[int(index)]
        return q.text, *q.options, f"Example {V.md_escape(q.qid)} filled."

    def on_ask(sid, question, *options):
        _need_sid(sid)
        q = Question("ui", (question or "").strip(), [(o or "").strip() for o in options])
        if not q.text:
            raise _error("Write a question first (or paste a block and press Fill).")
        if sum(1 for o in q.options if o) < 2:
            raise _error("Give at least two options.")
        if not store.exists(sid):
            raise _error("The library is empty: add PDFs on the Library tab first.")
        with store.open(sid) as pipe:
            try:
                a = pipe.ask(q)
            except (ValueError, BackendError) as e:  # an empty library; a model server down or timing out
                raise _error(str(e)) from None
            except Exception as e:  # an in-process model failing: logged, and said in plain words
                log.error("answering failed", exc_info=e)
                raise _error(f"The answer could not be computed: {type(e).__name__}: {e}") from None
            refs = V.candidate_refs(q, a)
            top = refs[0] if refs else {}
            img = V.picture(pipe.library, top.get("chunk_id"), a.doc_hash, a.page)
        return (V.answer_markdown(q, a), V.probs_frame(a.probabilities), img,
                _df(V.candidate_rows(refs), V.CANDIDATE_COLUMNS), refs,
                _df(V.timing_rows(a.timings), ["Stage", "Seconds"]), gr.update(value=None, visible=False), "")

    def on_candidate(sid, refs, evt: gr.SelectData):
        _need_sid(sid)
        row = evt.row_value or []
        ref = next((r for r in refs or [] if row and r["rank"] == row[0]), None)
        if ref is None:
            return gr.update(value=None, visible=False), ""
        with store.open(sid) as pipe:
            img = V.picture(pipe.library, ref["chunk_id"], ref["doc_hash"], ref["page"])
        caption = (f"Candidate {ref['rank']}: {V.md_escape(ref['doc_name'])}, page {ref['page']}"
                   f" — rerank {ref['scores'].get('rerank', float('nan')):.3f}")
        return gr.update(value=img, visible=True), caption

    # ---- evaluate --------------------------------------------------------------------
    def run_outputs(sid, name):
        run = R.load_run(store.runs_dir(sid), name)
        counts = R.kind_counts(run["traces"])
        radio = gr.update(choices=[(f"{k} ({counts[k]})", k) for k in R.KINDS], value=R.ALL)
        table = _df(R.question_rows(run["traces"], run["questions"]), R.QUESTION_COLUMNS)
        d = run["dir"]
        return (V.metrics_markdown(run["metrics"], name), V.metrics_frame(run["metrics"]), radio, table, name,
                _download_copy(d / "submission.csv"), _download_copy(d / "trace.jsonl"))

    def on_run(sid, csv_file, name, progress=gr.Progress()):
        _need_sid(sid)
        if not csv_file:
            raise _error("Upload a questions CSV first.")
        try:
            questions, problems = read_questions(Path(csv_file).read_bytes(), max_questions=settings.max_questions)
        except QuestionsError as e:
            raise _error(str(e)) from None
        if not store.exists(sid):
            raise _error("The library is empty: add the PDFs on the Library tab first.")
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
                    log.error("evaluation failed", exc_info=val)
                    raise _error(f"The run failed: {type(val).__name__}: {val}")
                else:
                    failed = V.failed_text(val[1])
        yield (f"Run {V.md_escape(name)} finished: {V.plural(len(questions), 'question')}{failed}.{notes}", *run_outputs(sid, name),
               *runs_choices(sid))

    def on_open_run(sid, name):
        _need_sid(sid)
        if not name:
            raise _error("Pick a saved run first.")
        return f"Opened run {V.md_escape(name)}.", *run_outputs(sid, name)

    def on_filter(sid, name, kind):
        if not name or not valid_session_id(sid):
            return gr.skip()
        run = R.load_run(store.runs_dir(sid), name)
        return _df(R.question_rows(R.filter_traces(run["traces"], kind), run["questions"]), R.QUESTION_COLUMNS)

    def on_question(sid, name, evt: gr.SelectData):
        _need_sid(sid)
        row = evt.row_value or []
        if not name or not row:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        run = R.load_run(store.runs_dir(sid), name)
        rec = next((t for t in run["traces"] if t["Question_ID"] == str(row[0])), None)
        if rec is None:
            return "", None, None, None, ""
        import json

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
        kinds = R.error_kinds(rec)
        head += f"\n\n{'; '.join(kinds) if kinds else 'no errors' if rec.get('gold') else 'no gold to compare with'}"
        return (head, json.dumps(V.trace_for_display(rec), ensure_ascii=False, indent=1), img,
                _df(V.rank_rows(rec), ["Stage", "Gold rank"]), V.probs_frame(rec.get("probabilities") or {}))

    def on_compare(sid, a, b):
        _need_sid(sid)
        if not a or not b:
            raise _error("Pick two saved runs.")
        ra, rb = R.load_run(store.runs_dir(sid), a), R.load_run(store.runs_dir(sid), b)
        c = R.compare_runs(ra, rb)
        deltas = _df([[d["metric"], d["A"], d["B"], d["B − A"]] for d in c["deltas"]], DELTA_COLUMNS)
        flips = _df([[f[k] for k in FLIP_COLUMNS] for f in c["flips"]], FLIP_COLUMNS)
        summary = (f"A = {V.md_escape(a)}, B = {V.md_escape(b)}: {c['fixed']} fixed (wrong in A, right in B), "
                   f"{c['broken']} broken (right in A, wrong in B)")
        return summary, deltas, flips

    # ---- layout -------------------------------------------------------------------------
    with gr.Blocks(title="PDF QA — six-option questions over your PDFs", delete_cache=(3600, 6 * 3600)) as demo:
        stored = gr.BrowserState("", storage_key=STORAGE_KEY, secret=browser_secret(data_dir))
        sid = gr.State("")
        refs_state = gr.State([])
        run_state = gr.State("")
        gr.Markdown("# PDF QA\nAnswers six-option (A–F) questions from your PDFs, names the document and page, "
                    "and shows the evidence." + (" *Shared library: everyone sees the same documents.*" if shared
                                                 else " Your library is private to this browser."))
        with gr.Tabs():
            with gr.Tab("Library", id="library"):
                with gr.Row():
                    upload = gr.File(label=f"Upload PDFs (many at once; up to {settings.max_upload_mb:g} MB each)", file_count="multiple", file_types=[".pdf"],
                                     elem_id="upload", scale=3)
                    with gr.Column(scale=1):
                        sample_btn = gr.Button("Load the sample corpus", elem_id="load-sample")
                        gr.Markdown(f"Indexes the PDFs in `{sample_dir.as_posix()}/`.")
                status = gr.Dataframe(_df([], V.STATUS_COLUMNS), label="Indexing", interactive=False,
                                      elem_id="ingest-status", wrap=True)
                docs = gr.Dataframe(_df([], V.DOC_COLUMNS), label="Indexed documents", interactive=False,
                                    elem_id="documents", wrap=True)
                with gr.Row():
                    remove_pick = gr.Dropdown(label="Document to remove", choices=[], elem_id="remove-pick", scale=3)
                    remove_btn = gr.Button("Remove", variant="stop", elem_id="remove", scale=1)
                lib_msg = gr.Markdown(elem_id="library-message")

            with gr.Tab("Ask", id="ask"):
                with gr.Row():
                    with gr.Column(scale=2):
                        block = gr.Textbox(label="Paste a question with its options (one block)", lines=6,
                                           placeholder="Question?\nA) …\nB) …\nC) …\nD) …\nE) …\nF) …",
                                           elem_id="block")
                        fill_btn = gr.Button("Fill the fields from the block", elem_id="fill")
                    with gr.Column(scale=1):
                        example_set = gr.Dataset(components=["textbox"], samples=[[f"{q.qid}: {q.text}"] for q in examples],
                                                 type="index", label="Examples (sample corpus)", samples_per_page=6,
                                                 elem_id="examples", visible=bool(examples))
                fill_msg = gr.Markdown(elem_id="fill-message")
                question = gr.Textbox(label="Question", lines=2, elem_id="question")
                option_boxes = []
                for row in (LETTERS[:3], LETTERS[3:]):
                    with gr.Row():
                        for L in row:
                            option_boxes.append(gr.Textbox(label=L, elem_id=f"option-{L}", lines=1))
                ask_btn = gr.Button("Answer", variant="primary", elem_id="ask")
                with gr.Row():
                    with gr.Column(scale=1):
                        answer_md = gr.Markdown(elem_id="answer", latex_delimiters=[])
                        probs_plot = gr.BarPlot(None, x="option",
                                                y="probability", y_lim=[0, 1], label="Probabilities", sort="x",
                                                elem_id="probabilities", height=260)
                        timings = gr.Dataframe(_df([], ["Stage", "Seconds"]), label="Time per stage (s)",
                                               interactive=False, elem_id="timings")
                    with gr.Column(scale=2):
                        page_img = gr.Image(label="Evidence page", type="pil", format="png", interactive=False,
                                            elem_id="evidence-page", height=860)
                cands = gr.Dataframe(_df([], V.CANDIDATE_COLUMNS), label="Ranked candidates — select a row to see its page",
                                     interactive=False, elem_id="candidates", wrap=True, max_height=520,
                                     column_widths=V.CANDIDATE_WIDTHS)
                cand_caption = gr.Markdown(elem_id="candidate-caption", latex_delimiters=[])
                cand_img = gr.Image(label="Selected candidate's page", type="pil", format="png", interactive=False,
                                    elem_id="candidate-page", height=860, visible=False)

            with gr.Tab("Evaluate", id="evaluate"):
                with gr.Row():
                    csv_in = gr.File(label="Questions CSV (competition format; gold columns optional)",
                                     file_types=[".csv"], elem_id="questions-csv", scale=2)
                    with gr.Column(scale=1):
                        run_name = gr.Textbox(label="Run name (optional)", elem_id="run-name")
                        run_btn = gr.Button("Run", variant="primary", elem_id="run")
                eval_msg = gr.Markdown(elem_id="eval-message", latex_delimiters=[])
                with gr.Row():
                    score_md = gr.Markdown(elem_id="score", latex_delimiters=[])
                    score_plot = gr.BarPlot(None, x="part", y="value", y_lim=[0, 1],
                                            label="Score and its parts", elem_id="score-plot", height=240)
                with gr.Row():
                    sub_dl = gr.DownloadButton("Download submission.csv", elem_id="download-submission")
                    trace_dl = gr.DownloadButton("Download trace.jsonl", elem_id="download-trace")
                kind = gr.Radio([(k, k) for k in R.KINDS], value=R.ALL, label="Show", elem_id="error-kind")
                qtable = gr.Dataframe(_df([], R.QUESTION_COLUMNS), label="Questions — select a row for its trace",
                                      interactive=False, elem_id="question-table", wrap=True, max_height=420)
                q_head = gr.Markdown(elem_id="question-head", latex_delimiters=[])
                with gr.Row():
                    with gr.Column(scale=1):
                        ranks = gr.Dataframe(_df([], ["Stage", "Gold rank"]), label="Gold page's rank per stage",
                                             interactive=False, elem_id="gold-ranks")
                        q_probs = gr.BarPlot(None, x="option",
                                             y="probability", y_lim=[0, 1], label="Letter probabilities", sort="x",
                                             elem_id="question-probabilities", height=240)
                    with gr.Column(scale=2):
                        gr.Markdown("**Predicted page** (left, its top candidate highlighted) and **gold page** "
                                    "(right, the best-ranked candidate on it highlighted)")
                        pages = gr.Image(label="Predicted page | gold page", show_label=False, type="pil",
                                         format="png", interactive=False, elem_id="trace-pages", height=600)
                trace_code = gr.Code(label="Trace", language="json", elem_id="trace", max_lines=30)
                gr.Markdown("### Compare two saved runs")
                with gr.Row():
                    run_a = gr.Dropdown(label="Run A", choices=[], elem_id="run-a")
                    run_b = gr.Dropdown(label="Run B", choices=[], elem_id="run-b")
                    with gr.Column():
                        open_btn = gr.Button("Open run A", elem_id="open-run")
                        compare_btn = gr.Button("Compare A → B", elem_id="compare")
                compare_md = gr.Markdown(elem_id="compare-summary", latex_delimiters=[])
                deltas = gr.Dataframe(_df([], DELTA_COLUMNS), label="Score deltas", interactive=False,
                                      elem_id="deltas")
                flips = gr.Dataframe(_df([], FLIP_COLUMNS), label="Questions that flipped", interactive=False,
                                     elem_id="flips")

        # ---- events -----------------------------------------------------------------------
        demo.load(on_load, [stored], [stored, sid, docs, remove_pick, run_a, run_b])
        upload.upload(on_upload, [upload, sid], [status, docs, remove_pick, upload], show_progress="minimal",
                      **model_work)
        sample_btn.click(on_sample, [sid], [status, docs, remove_pick, upload], show_progress="minimal", **model_work)
        remove_btn.click(on_remove, [remove_pick, sid], [lib_msg, docs, remove_pick])

        fill_btn.click(on_fill, [block], [question, *option_boxes, fill_msg])
        example_set.click(on_example, [example_set], [question, *option_boxes, fill_msg])
        ask_btn.click(on_ask, [sid, question, *option_boxes],
                      [answer_md, probs_plot, page_img, cands, refs_state, timings, cand_img, cand_caption],
                      **model_work)
        cands.select(on_candidate, [sid, refs_state], [cand_img, cand_caption])

        run_btn.click(on_run, [sid, csv_in, run_name],
                      [eval_msg, score_md, score_plot, kind, qtable, run_state, sub_dl, trace_dl, run_a, run_b],
                      show_progress_on=[eval_msg], **model_work)
        open_btn.click(on_open_run, [sid, run_a],
                       [eval_msg, score_md, score_plot, kind, qtable, run_state, sub_dl, trace_dl])
        kind.change(on_filter, [sid, run_state, kind], [qtable])
        qtable.select(on_question, [sid, run_state], [q_head, trace_code, pages, ranks, q_probs])
        compare_btn.click(on_compare, [sid, run_a, run_b], [compare_md, deltas, flips])
    demo.pdfqa_store = store  # for tests and maintenance
    return demo
