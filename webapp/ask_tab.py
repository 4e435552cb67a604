"""The Ask tab: a question and six options (typed, pasted as one block, or an example) → the answer,
its probabilities, the evidence page with the chunk highlighted, every candidate, and stage times.

:func:`layout` places the components (:class:`AskTab`), the ``on_*`` handlers return
``{component: value}``, :func:`wire` connects them.
"""
from __future__ import annotations

import html
import logging
import time
from dataclasses import asdict, dataclass

import gradio as gr

from pipeline.answering.freeform import answer_page, is_refusal
from pipeline.checks import check_question
from pipeline.documents.evidence import evidence_for, why_this_answer
from pipeline.documents.ingest import safe_name
from pipeline.errors import PdfQaError
from pipeline.evaluation.judged import shown_of
from pipeline.types import LETTERS, Candidate, Question

from . import judge_row as J
from . import runs as R
from . import views as V
from .blocks import BlockError, parse_block
from .common import NO_SESSION, QUIET, Context, bind, df, handled, message, need_sid, user_error
from .line import served
from .sessions import valid_session_id

log = logging.getLogger(__name__)

# brings the answer into view when it arrives (run in the browser after the answer step)
SCROLL_TO_ANSWER = "() => { const e = document.getElementById('answer'); if (e) e.scrollIntoView({behavior: 'smooth', block: 'start'}); }"
CROP_LABEL = "Evidence, enlarged (strong: the lines that support the answer)"
PAGE_LABEL = "Evidence page"
CLOSEST_LABEL = "The closest passage found: not an answer"
NOT_ANSWER_CHART = "Not an answer: the model's leaning"  # one line above the bars
CANDIDATES_LABEL = ("Ranked candidates — select a row to see its page. Rank = the final order: by rerank, except "
                    "that in a long document its passages are re-ordered among their own places by page choice (the "
                    "page column). To model = read by the model. Scores: fused = dense and lexical together "
                    "(z-scores); dense = embedding similarity; lexical = BM25; option_… = the same for the question "
                    "with the options")
TIMING_COLUMNS = ["Stage", "Seconds"]


@dataclass
class AskTab:
    block: gr.Textbox
    fill_btn: gr.Button
    examples: gr.Dataset
    fill_msg: gr.Markdown
    question: gr.Textbox
    options: list[gr.Textbox]
    clicked: gr.State
    ask_btn: gr.Button
    status: gr.Markdown
    stale: gr.Markdown
    shown_q: gr.State  # the question (and options) whose result is on screen
    answer: gr.Markdown
    probs: gr.BarPlot
    timings: gr.Dataframe
    evidence: gr.Column  # the two evidence tabs: hidden while there is no evidence to show
    crop: gr.Image
    page: gr.Image
    why: gr.Markdown
    order_panel: gr.Accordion
    order_btn: gr.Button
    order_md: gr.Markdown
    order_table: gr.Dataframe
    cands: gr.Dataframe
    cand_caption: gr.Markdown
    cand_img: gr.Image
    refs: gr.State
    asked: gr.State  # the last six-option question and its passages (for the option-order check)
    judge: J.JudgeRow  # "Judge this answer" under the answer

    @property
    def answer_outputs(self) -> list:
        """What an answer sets, in the order the API returns them (the status line first, the answer second,
        the candidates seventh: bench/load.py reads them by position; new outputs go at the end)."""
        return [self.status, self.answer, self.probs, self.crop, self.page, self.why, self.cands, self.refs,
                self.timings, self.cand_img, self.cand_caption, self.asked, self.evidence, self.judge.shown,
                self.judge.box]


def _question_inputs(ctx: Context) -> dict:
    """The question, its options and the Answer button on the left (so the button is in view at 1280×720);
    pasting a block and the sample's examples on the right."""
    got = {"options": []}
    with gr.Row():
        with gr.Column(scale=3):
            got["question"] = gr.Textbox(label="Question (leave the options empty for a short answer from the "
                                               "documents)", lines=2, elem_id="question")
            for row in (LETTERS[:3], LETTERS[3:]):
                with gr.Row():
                    for L in row:
                        got["options"].append(gr.Textbox(label=L, elem_id=f"option-{L}", lines=1))
            with gr.Row(equal_height=True):
                got["ask_btn"] = gr.Button("Answer", variant="primary", elem_id="ask", scale=1)
                got["status"] = gr.Markdown(elem_id="ask-status", latex_delimiters=[])
        with gr.Column(scale=2):
            got["block"] = gr.Textbox(label="…or paste a question with its options (one block)", lines=4,
                                      placeholder="Question?\nA) …\nB) …\nC) …\nD) …\nE) …\nF) …", elem_id="block")
            got["fill_btn"] = gr.Button("Fill the fields from the block", elem_id="fill", size="sm")
            got["fill_msg"] = gr.Markdown(elem_id="fill-message")
            got["examples"] = gr.Dataset(components=["textbox"], samples=[[f"{q.qid}: {q.text}"] for q in ctx.examples],
                                         type="index", label="Examples (sample corpus)", samples_per_page=6,
                                         elem_id="examples", visible=False)
    return got


def _answer_panes() -> dict:
    got = {}
    with gr.Row():
        with gr.Column(scale=1):
            got["stale"] = gr.Markdown(elem_id="stale-note", latex_delimiters=[])
            got["answer"] = gr.Markdown(elem_id="answer", latex_delimiters=[])
            got["probs"] = gr.BarPlot(None, x="option", y="probability", y_lim=[0, 1], label="Probabilities",
                                      sort="x", elem_id="probabilities", height=260)
            got["timings"] = gr.Dataframe(df([], TIMING_COLUMNS), label="Time per stage (s)", interactive=False,
                                          elem_id="timings")
        with gr.Column(scale=2):
            with gr.Column(visible=False, elem_id="evidence-box") as got["evidence"], gr.Tabs():
                with gr.Tab("Evidence (enlarged)"):
                    got["crop"] = gr.Image(label=CROP_LABEL, type="pil", format="png", interactive=False,
                                           elem_id="evidence-crop", width=700)
                with gr.Tab("Whole page"):
                    got["page"] = gr.Image(label=PAGE_LABEL, type="pil", format="png", interactive=False,
                                           elem_id="evidence-page", height=860)
            got["why"] = gr.Markdown(elem_id="why", latex_delimiters=[])
            with gr.Accordion("Option-order check: does the answer hold with the options reordered?", open=False,
                              elem_id="order-panel", visible=False) as got["order_panel"]:
                got["order_btn"] = gr.Button("Re-ask in 6 orders (same passages)", elem_id="order-check", size="sm",
                                             interactive=False)
                got["order_md"] = gr.Markdown(elem_id="order-verdict", latex_delimiters=[])
                got["order_table"] = gr.Dataframe(df([], V.ORDER_COLUMNS), interactive=False, elem_id="order-table",
                                                  label="Each order's probabilities, under the options' own letters")
    return got


def layout(ctx: Context) -> AskTab:
    got = _question_inputs(ctx)
    got.update(_answer_panes())
    got["judge"] = J.layout()  # under the answer, above the candidates: small, the answer stays the focus
    got["cands"] = gr.Dataframe(df([], V.CANDIDATE_COLUMNS), label=CANDIDATES_LABEL, interactive=False,
                                elem_id="candidates", wrap=True, max_height=520, column_widths=V.CANDIDATE_WIDTHS)
    got["cand_caption"] = gr.Markdown(elem_id="candidate-caption", latex_delimiters=[])
    got["cand_img"] = gr.Image(label="Selected candidate's page", type="pil", format="png", interactive=False,
                               elem_id="candidate-page", height=860, visible=False)
    return AskTab(clicked=gr.State(0.0), refs=gr.State([]), asked=gr.State({}), shown_q=gr.State([]), **got)


def examples_visible(ctx: Context, sid: str) -> bool:
    """The sample's examples are shown only when the library holds a document they ask about."""
    if not ctx.examples or not valid_session_id(sid) or not ctx.store.exists(sid):
        return False
    with ctx.store.open(sid) as pipe:
        names = {d.name for d in pipe.library.documents()}
    return any(q.gold_doc and safe_name(q.gold_doc) in names for q in ctx.examples)


# ---- filling the fields ----------------------------------------------------------------------
def on_fill(ui: AskTab, block):
    try:
        p = parse_block(block)
    except BlockError as e:  # a message only: the fields keep what they hold
        log.info("filling: %s", e)
        return {ui.fill_msg: f"⚠ Not filled: {V.md_escape(str(e))}."}
    note = ("Filled. " + "; ".join(p.notes)) if p.notes else "Filled."
    return {ui.question: p.question, **dict(zip(ui.options, p.options)), ui.fill_msg: note}


def on_example(ctx: Context, ui: AskTab, index):
    q = ctx.examples[int(index)]
    return {ui.question: q.text, **dict(zip(ui.options, q.options)), ui.fill_msg: f"Example {V.md_escape(q.qid)} filled."}


# ---- answering ---------------------------------------------------------------------------------
def refusal(ctx: Context, sid, question, options) -> str:
    """Why the question cannot be asked ("" when it can): no session, a mistake in it, an empty library."""
    try:
        need_sid(sid)
        check_question(question, options, ctx.settings, free_ok=True)
    except gr.Error as e:
        return html.unescape(str(e.message))
    except PdfQaError as e:
        log.info("asking: %s: %s", type(e).__name__, e)
        return str(e)[:1].upper() + str(e)[1:] + "."
    if not ctx.store.exists(sid):
        log.info("asking: empty library")
        return "The library is empty: add PDFs on the Library tab first."
    return ""


def on_validate(ctx: Context, sid, question, *options):
    """The fast first step: a mistake stops here (:func:`on_refused` says it where the answer goes)."""
    said = refusal(ctx, sid, question, options)
    if said:
        raise user_error(said, toast=False)  # on_refused says it in the status and answer panes


def cleared(ui: AskTab) -> dict:
    """Every pane of a result emptied (the result shown belonged to another question)."""
    return {ui.answer: "", ui.probs: gr.update(value=None, visible=False), ui.crop: gr.update(value=None, label=CROP_LABEL),
            ui.page: gr.update(value=None, label=PAGE_LABEL), ui.evidence: gr.update(visible=False), ui.why: "",
            ui.cands: df([], V.CANDIDATE_COLUMNS), ui.refs: [], ui.timings: df([], TIMING_COLUMNS),
            ui.cand_img: gr.update(value=None, visible=False), ui.cand_caption: "", ui.asked: {},
            ui.judge.shown: {}, ui.judge.box: gr.update(visible=False)}


def no_order_check(ui: AskTab) -> dict:
    """The option-order check hidden and its last result emptied (it belonged to the question asked before)."""
    return {ui.order_panel: gr.update(visible=False), ui.order_md: "", ui.order_table: df([], V.ORDER_COLUMNS)}


def on_refused(ctx: Context, ui: AskTab, sid, question, *options):
    """A refused question: the reason stays where the answer would be, and no earlier result is left beside it."""
    said = refusal(ctx, sid, question, options) or "The question was not asked."
    return {**cleared(ui), ui.stale: "", ui.status: f"⚠ Not asked: {V.md_escape(said)}",
            ui.answer: f"## Not asked\n{V.md_escape(said)}  \nThe question was not sent to the model: nothing here "
                       "answers it.", ui.shown_q: [], **no_order_check(ui)}


def on_start(ctx: Context, ui: AskTab, question, *options):
    """The button busy, the place in line at once, and the previous result cleared (it would read as this
    question's)."""
    ctx.line.join(ticket := time.time())
    return {**cleared(ui), **no_order_check(ui), ui.stale: "", ui.status: ctx.line.message(ticket),
            ui.ask_btn: gr.update(interactive=False, value="Answering…"), ui.clicked: ticket,
            ui.order_btn: gr.update(interactive=False), ui.shown_q: [question or "", *(o or "" for o in options)]}


def on_edit(ui: AskTab, shown_q, question, *options):
    """Once the question or an option differs from the one whose result is shown, that result is marked previous."""
    now = [question or "", *(o or "" for o in options)]
    if not shown_q or now == list(shown_q):
        return {ui.stale: ""}
    return {ui.stale: f"⚠ **Previous result** — below is the answer to the question asked before "
                      f"(«{V.md_escape(shown_q[0], 90)}»). Press Answer for this one."}


def seconds_text(seconds: float) -> str:
    """Whole seconds, never "-0 s" (two clock readings a moment apart can differ by a tiny negative)."""
    return f"{max(0.0, seconds):.0f} s"


def answered_text(took: str, found: bool = True, n_docs: int = 0) -> str:
    """The status line once a result is shown; "not found" worded as its heading is (``V.not_found_title``: "in
    this document" in a library of one)."""
    return f"Answered in {took}." if found else f"Searched in {took}: {V.not_found_title(n_docs).lower()}."


def _answered(ui: AskTab, t_click, found: bool = True, n_docs: int = 0) -> dict:
    return {ui.status: answered_text(seconds_text(time.time() - float(t_click)), found, n_docs)}


def _evidence_views(ctx: Context, pipe, q: Question, a, top: dict) -> tuple:
    """The enlarged evidence and "Why this answer" (a page that cannot be drawn: the rest still shows)."""
    crop, why = None, ""
    option = q.options[LETTERS.index(a.letter)]
    try:
        chunk = pipe.library.chunks([top["chunk_id"]])[0] if top else None
        if chunk is not None:
            crop = evidence_for(pipe.library, chunk, q.text, option, a.page).crop
        ranked = sorted((L for L, o in zip(LETTERS, q.options) if o),
                        key=lambda L: a.probabilities.get(L, 0.0), reverse=True)[:2]
        chunks = [c.chunk for c in a.evidence]
        # more lines than shown, so the runner-up keeps lines of its own after the chosen option's are taken
        why = V.why_markdown(q, a, why_this_answer(pipe.library, chunks, q.text, dict(zip(LETTERS, q.options)),
                                                   ranked, k=4))
    except (ValueError, FileNotFoundError) as e:
        log.info("evidence not shown: %s", e)
    return crop, why


def asking(ui: AskTab, pipe, q: Question, reading: str):
    """``pipe.ask(q)`` in a worker thread: yields the status as each stage ends (``reading``: what the answer
    stage does, ``{k}`` for the passages it reads), then returns the answer (a failure raises)."""
    for kind, val in V.stream(lambda report: pipe.ask(q, on_stage=report)):
        if kind == "error":
            raise val
        if kind == "done":
            return val
        if val[0] == "draft":
            draft = V.draft_markdown(val[1])
            yield {ui.status: "Writing the answer…", **({ui.answer: draft} if draft else {})}
        elif val[0] == "retry":
            first = "its answer was not supported" if val[1]["first"] and not is_refusal(val[1]["first"]) \
                else "the model found no answer there"
            more = val[1].get("more")
            wider = f"{V.plural(more, 'more passage')} beside them" if more is not None else \
                V.plural(val[1]["k"], "shorter passage")
            yield {ui.status: f"Not answered from the first passages ({first}): reading {wider}…",
                   ui.answer: "## Answer (still looking…)\nThe first passages gave no checked answer; a wider set "
                              "is being read."}
        elif val[0] == "search":
            s = pipe.settings.answer
            k = min(s.top_k_answer, len(val[1].reranked))
            first = f"{V.plural(s.read_first, 'passage')} ({k} if that answer is unsure)" if 0 < s.read_first < k \
                else V.plural(k, "passage")
            yield {ui.status: reading.format(k=first)}


def ask_options(ctx: Context, ui: AskTab, pipe, q: Question, t_click, wait: float, sid: str):
    """A six-option question: search, score the options, draw the evidence (yielding the status as it goes); the
    pictures are the visitor's files (``ctx.files``)."""
    yield {ui.status: "Retrieving passages…"}
    a = yield from asking(ui, pipe, q, f"Reading {{k}} and scoring {sum(1 for o in q.options if o)} options…")
    yield {ui.status: "Drawing the evidence…"}
    titles = V.titles_of(pipe.library)
    refs = V.candidate_refs(q, a, titles)
    top = refs[0] if refs else {}
    img = ctx.files.image(sid, V.picture(pipe.library, top.get("chunk_id"), a.doc_hash, a.page), a.doc_hash)
    crop, why = _evidence_views(ctx, pipe, q, a, top)
    crop = ctx.files.image(sid, crop, a.doc_hash)
    scorer, found = ctx.settings.answer.scorer, not V.not_in_documents(a)
    held = R.held_text(ctx.store.runs_dir(sid), a.probabilities.get(a.letter, 0.0)) if found else ""
    crop_label, page_label = (CROP_LABEL, PAGE_LABEL) if found else (CLOSEST_LABEL, CLOSEST_LABEL)
    if not found:  # no answer: the lines are what the model leaned on, not why an answer is right
        why = why.replace("**Why this answer**", "**What the model leaned on (not an answer)**", 1)
    yield {**_answered(ui, t_click, found, len(titles)), ui.answer: V.answer_markdown(q, a, titles, scorer, held),
           ui.probs: gr.update(value=V.probs_frame(a.probabilities, options=q.options), visible=True,
                               label=V.chart_title(scorer) if found else NOT_ANSWER_CHART),
           ui.crop: gr.update(value=crop, label=crop_label), ui.page: gr.update(value=img, label=page_label),
           ui.evidence: gr.update(visible=crop is not None or img is not None), ui.why: why,
           ui.cands: df(V.candidate_rows(refs), V.CANDIDATE_COLUMNS), ui.refs: refs,
           ui.timings: df(V.timing_rows({"queue wait": wait, **a.timings}), TIMING_COLUMNS),
           ui.cand_img: gr.update(value=None, visible=False), ui.cand_caption: "",
           ui.asked: {"question": q.text, "options": q.options, "evidence": [c.chunk.chunk_id for c in a.evidence],
                      "probabilities": a.probabilities}, ui.judge.shown: asdict(shown_of(a))}


def ask_free(ctx: Context, ui: AskTab, pipe, q: Question, t_click, wait: float, sid: str):
    """A question without options: a short answer grounded in the passages, or "not found" (then the passage
    shown is labelled the closest one, not the answer's support)."""
    yield {ui.status: "No options: finding a short answer — retrieving passages…"}
    fa = yield from asking(ui, pipe, q, "No options: finding a short answer — reading {k}…")
    yield {ui.status: "Drawing the evidence…"}
    titles = V.titles_of(pipe.library)
    shown = {c.chunk.chunk_id for c in fa.evidence}
    refs = V.refs_for(fa.candidates, shown, lambda c: answer_page(c, q, fa.text), titles)
    at = fa.evidence_chunk or (fa.closest[0] if fa.closest else None)
    img = crop = None
    if at is not None:
        img = ctx.files.image(sid, V.picture(pipe.library, at.chunk.chunk_id, at.chunk.doc_hash, fa.page),
                              at.chunk.doc_hash)
        try:
            crop = ctx.files.image(sid, evidence_for(pipe.library, at.chunk, q.text, fa.text, fa.page).crop,
                                   at.chunk.doc_hash)
        except (ValueError, FileNotFoundError) as e:
            log.info("evidence not shown: %s", e)
    crop_label, page_label = (CLOSEST_LABEL, CLOSEST_LABEL) if fa.abstained else (CROP_LABEL, PAGE_LABEL)
    yield {**_answered(ui, t_click, not fa.abstained, len(titles)), ui.answer: V.free_answer_markdown(fa, titles),
           ui.probs: gr.update(value=None, visible=False), ui.crop: gr.update(value=crop, label=crop_label),
           ui.page: gr.update(value=img, label=page_label),
           ui.evidence: gr.update(visible=crop is not None or img is not None), ui.why: V.closest_markdown(fa, titles),
           ui.cands: df(V.candidate_rows(refs), V.CANDIDATE_COLUMNS), ui.refs: refs,
           ui.timings: df(V.timing_rows({"queue wait": wait, **fa.timings}), TIMING_COLUMNS),
           ui.cand_img: gr.update(value=None, visible=False), ui.cand_caption: "", ui.asked: {},
           ui.judge.shown: asdict(shown_of(fa))}


@served
def on_ask(ctx: Context, ui: AskTab, sid, t_click, question, *options):
    t_click = float(t_click or 0.0) or time.time()  # no click time (an API call): timed from here
    wait = max(0.0, time.time() - t_click)
    q = Question("ui", (question or "").strip(), [(o or "").strip() for o in options])
    if not valid_session_id(sid):  # the page's state was dropped (or the API was called without a page)
        gr.Warning(html.escape(NO_SESSION))
        yield {ui.status: f"⚠ {V.md_escape(NO_SESSION)}"}
        return
    try:
        with ctx.store.open(sid) as pipe:
            if any(q.options):
                yield from ask_options(ctx, ui, pipe, q, t_click, wait, sid)
            else:
                yield from ask_free(ctx, ui, pipe, q, t_click, wait, sid)
    except Exception as e:  # the message where the answer would be (and as a toast); no earlier result beside it
        said = message(e, "answering")
        gr.Warning(html.escape(said))
        yield {**cleared(ui), ui.status: f"⚠ {V.md_escape(said)}",
               ui.answer: f"## Not answered\n{V.md_escape(said)}"}


def on_answered(ui: AskTab, asked):
    """The button back; the option-order check offered for a six-option answer, its last result cleared."""
    return {ui.ask_btn: gr.update(interactive=True, value="Answer"), ui.order_btn: gr.update(interactive=bool(asked)),
            ui.order_md: "", ui.order_table: df([], V.ORDER_COLUMNS), ui.order_panel: gr.update(visible=bool(asked))}


# ---- the option-order check and the candidates ------------------------------------------------------
@handled("checking the option order")
def on_order_check(ctx: Context, ui: AskTab, sid, asked):
    """The last answer re-scored with its options in every cyclic order, over the same passages."""
    need_sid(sid)
    if not asked or not asked.get("options"):
        gr.Warning("Ask a question with options first: the check re-asks the last one.")
        return gr.skip()  # no change (an empty dict is not read as one by Gradio)
    q = Question("ui", asked["question"], asked["options"])
    with ctx.store.open(sid) as pipe:
        chunks = pipe.library.chunks(asked["evidence"])
        if len(chunks) != len(asked["evidence"]):
            gr.Warning("A passage of the last answer is gone (its document was removed): ask again.")
            return gr.skip()  # no change (an empty dict is not read as one by Gradio)
        check = pipe.order_check(q, [Candidate(c, {}, i) for i, c in enumerate(chunks, 1)], n=6)
    return {ui.order_md: V.order_markdown(check, asked.get("probabilities") or {}),
            ui.order_table: df(V.order_rows(check), V.ORDER_COLUMNS)}


@handled("showing a candidate's page")
def on_candidate(ctx: Context, ui: AskTab, sid, refs, evt: gr.SelectData):
    need_sid(sid)
    row = evt.row_value or []
    ref = next((r for r in refs or [] if row and r["rank"] == row[0]), None)
    if ref is None:
        return {ui.cand_img: gr.update(value=None, visible=False), ui.cand_caption: ""}
    with ctx.store.open(sid) as pipe:
        img = ctx.files.image(sid, V.picture(pipe.library, ref["chunk_id"], ref["doc_hash"], ref["page"]),
                              ref["doc_hash"])
    label = V.doc_label(ref.get("title", ""), ref["doc_name"])
    caption = (f"Candidate {ref['rank']}: {V.md_escape(label)}, page {ref['page']}"
               f" — rerank {ref['scores'].get('rerank', float('nan')):.3f}")
    return {ui.cand_img: gr.update(value=img, visible=True), ui.cand_caption: caption}


def wire(ctx: Context, ui: AskTab, sid: gr.State) -> None:
    fields = [ui.question, *ui.options, ui.fill_msg]
    ui.fill_btn.click(bind(on_fill, ui), [ui.block], fields)
    ui.examples.click(bind(on_example, ctx, ui), [ui.examples], fields)
    quiet = QUIET  # never raise (see common.QUIET); on_validate may refuse, so it is queued
    for field in (ui.question, *ui.options):
        field.change(bind(on_edit, ui), [ui.shown_q, ui.question, *ui.options], [ui.stale], **quiet)
    panes = [ui.answer, ui.probs, ui.crop, ui.page, ui.evidence, ui.why, ui.cands, ui.refs, ui.timings, ui.cand_img,
             ui.cand_caption, ui.asked, ui.stale, ui.shown_q, ui.judge.shown, ui.judge.box]
    validated = ui.ask_btn.click(bind(on_validate, ctx), [sid, ui.question, *ui.options], None,
                                 show_progress="hidden")
    order = [ui.order_panel, ui.order_md, ui.order_table]
    validated.failure(bind(on_refused, ctx, ui), [sid, ui.question, *ui.options], [ui.status, *order, *panes],
                      **quiet)
    validated.success(bind(on_start, ctx, ui), [ui.question, *ui.options],
                      [ui.status, ui.ask_btn, ui.clicked, ui.order_btn, *order, *panes], **quiet) \
        .success(bind(on_ask, ctx, ui), [sid, ui.clicked, ui.question, *ui.options], ui.answer_outputs,
                 # one wait estimate: the status line's (place in line, the answers measured here), not also
                 # Gradio's queue timer drawn over it (issue 55)
                 show_progress="hidden", api_name="on_ask", **ctx.model_work) \
        .then(bind(on_answered, ui), [ui.asked], [ui.ask_btn, ui.order_btn, ui.order_md, ui.order_table,
                                                   ui.order_panel], **quiet) \
        .then(bind(J.on_shown, ctx, ui.judge), [sid, ui.shown_q, ui.judge.shown], ui.judge.outputs, **quiet) \
        .then(None, None, None, js=SCROLL_TO_ANSWER)
    J.wire(ctx, ui.judge, sid, ui.shown_q)
    ui.order_btn.click(lambda: "Re-asking with the options in 6 orders…", None, [ui.order_md], **quiet) \
        .then(bind(on_order_check, ctx, ui), [sid, ui.asked], [ui.order_md, ui.order_table],
              show_progress_on=[ui.order_md], **ctx.model_work)
    ui.cands.select(bind(on_candidate, ctx, ui), [sid, ui.refs], [ui.cand_img, ui.cand_caption])
