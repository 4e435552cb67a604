"""The Ask tab: a question and six options (typed, pasted as one block, or an example) → the answer,
its probabilities, the evidence page with the chunk highlighted, every candidate, and stage times."""
from __future__ import annotations

import html
import logging
import time

import gradio as gr

from pipeline.checks import check_question
from pipeline.errors import PdfQaError
from pipeline.documents.evidence import evidence_for, why_this_answer
from pipeline.answering.freeform import answer_page
from pipeline.types import LETTERS, Candidate, Question

from . import views as V
from .blocks import BlockError, parse_block
from .common import NO_SESSION, Context, df, handled, message, need_sid, user_error
from .sessions import valid_session_id

log = logging.getLogger(__name__)

# brings the answer into view when it arrives (run in the browser after the answer step)
SCROLL_TO_ANSWER = "() => { const e = document.getElementById('answer'); if (e) e.scrollIntoView({behavior: 'smooth', block: 'start'}); }"


def examples_visible(ctx: Context, sid: str) -> bool:
    """The sample's examples are shown only when the library holds a document they ask about."""
    from pipeline.documents.ingest import safe_name

    if not ctx.examples or not valid_session_id(sid) or not ctx.store.exists(sid):
        return False
    with ctx.store.open(sid) as pipe:
        names = {d.name for d in pipe.library.documents()}
    return any(q.gold_doc and safe_name(q.gold_doc) in names for q in ctx.examples)


def build(ctx: Context, sid: gr.State) -> gr.Dataset:
    """The tab's blocks and handlers; returns the examples (their visibility follows the library)."""
    store, examples = ctx.store, ctx.examples
    refs_state = gr.State([])
    asked_state = gr.State({})  # the last six-option question and its passages (for the option-order check)
    with gr.Row():
        with gr.Column(scale=2):
            block = gr.Textbox(label="Paste a question with its options (one block)", lines=6,
                               placeholder="Question?\nA) …\nB) …\nC) …\nD) …\nE) …\nF) …", elem_id="block")
            fill_btn = gr.Button("Fill the fields from the block", elem_id="fill")
        with gr.Column(scale=1):
            example_set = gr.Dataset(components=["textbox"], samples=[[f"{q.qid}: {q.text}"] for q in examples],
                                     type="index", label="Examples (sample corpus)", samples_per_page=6,
                                     elem_id="examples", visible=False)
    fill_msg = gr.Markdown(elem_id="fill-message")
    question = gr.Textbox(label="Question (leave the options empty for a short answer from the documents)", lines=2,
                          elem_id="question")
    option_boxes = []
    for row in (LETTERS[:3], LETTERS[3:]):
        with gr.Row():
            for L in row:
                option_boxes.append(gr.Textbox(label=L, elem_id=f"option-{L}", lines=1))
    clicked = gr.State(0.0)
    with gr.Row(equal_height=True):
        ask_btn = gr.Button("Answer", variant="primary", elem_id="ask", scale=1)
        ask_status = gr.Markdown(elem_id="ask-status", latex_delimiters=[])
    with gr.Row():
        with gr.Column(scale=1):
            answer_md = gr.Markdown(elem_id="answer", latex_delimiters=[])
            probs_plot = gr.BarPlot(None, x="option", y="probability", y_lim=[0, 1], label="Probabilities", sort="x",
                                    elem_id="probabilities", height=260)
            timings = gr.Dataframe(df([], ["Stage", "Seconds"]), label="Time per stage (s)", interactive=False,
                                   elem_id="timings")
        with gr.Column(scale=2):
            with gr.Tabs():
                with gr.Tab("Evidence (enlarged)"):
                    crop_img = gr.Image(label="Evidence, enlarged (strong: the lines that support the answer)",
                                        type="pil", format="png", interactive=False, elem_id="evidence-crop",
                                        width=700)
                with gr.Tab("Whole page"):
                    page_img = gr.Image(label="Evidence page", type="pil", format="png", interactive=False,
                                        elem_id="evidence-page", height=860)
            why_md = gr.Markdown(elem_id="why", latex_delimiters=[])
            with gr.Accordion("Option-order check: does the answer hold with the options reordered?", open=False,
                              elem_id="order-panel", visible=False) as order_panel:
                order_btn = gr.Button("Re-ask in 6 orders (same passages)", elem_id="order-check", size="sm",
                                      interactive=False)
                order_md = gr.Markdown(elem_id="order-verdict", latex_delimiters=[])
                order_table = gr.Dataframe(df([], V.ORDER_COLUMNS), interactive=False, elem_id="order-table",
                                           label="Each order's probabilities, under the options' own letters")
    cands = gr.Dataframe(df([], V.CANDIDATE_COLUMNS), label="Ranked candidates — select a row to see its page. Scores: rerank = the final order; fused = "
                               "dense and lexical together (z-scores); dense = embedding similarity; lexical = BM25; "
                               "option_… = the same for the question with the options",
                         interactive=False, elem_id="candidates", wrap=True, max_height=520,
                         column_widths=V.CANDIDATE_WIDTHS)
    cand_caption = gr.Markdown(elem_id="candidate-caption", latex_delimiters=[])
    cand_img = gr.Image(label="Selected candidate's page", type="pil", format="png", interactive=False,
                        elem_id="candidate-page", height=860, visible=False)

    def on_fill(block):
        try:
            p = parse_block(block)
        except BlockError as e:  # a message only: the fields keep what they hold
            log.info("filling: %s", e)
            return *[gr.skip()] * 7, f"⚠ Not filled: {V.md_escape(str(e))}."
        note = ("Filled. " + "; ".join(p.notes)) if p.notes else "Filled."
        return p.question, *p.options, note

    def on_example(index):
        q = examples[int(index)]
        return q.text, *q.options, f"Example {V.md_escape(q.qid)} filled."

    def on_validate(sid, question, *options):
        """The fast first step: a mistake shows a message only, and the last result stays."""
        try:
            need_sid(sid)
            check_question(question, options, ctx.settings, free_ok=True)
        except PdfQaError as e:
            log.info("asking: %s: %s", type(e).__name__, e)
            raise user_error(str(e)[:1].upper() + str(e)[1:] + ".") from None
        if not store.exists(sid):
            log.info("asking: empty library")
            raise user_error("The library is empty: add PDFs on the Library tab first.")

    def on_start():
        return ("Waiting for the model… (queued behind other questions if any)",
                gr.update(interactive=False, value="Answering…"), time.time(), gr.update(interactive=False))

    def on_ask(sid, t_click, question, *options):
        wait = max(0.0, time.time() - float(t_click or time.time()))
        q = Question("ui", (question or "").strip(), [(o or "").strip() for o in options])
        skip = [gr.skip()] * 11
        if not valid_session_id(sid):  # the page's state was dropped (or the API was called without a page)
            gr.Warning(html.escape(NO_SESSION))
            yield f"⚠ {V.md_escape(NO_SESSION)}", *skip
            return
        try:
            with store.open(sid) as pipe:
                if not any(q.options):
                    yield from ask_free(pipe, q, t_click, wait)
                    return
                yield "Retrieving passages…", *skip
                retrieved, reranked, stage_times = pipe.retrieve(q)
                k = min(ctx.settings.top_k_answer, len(reranked))
                yield f"Reading {V.plural(k, 'passage')} and scoring {sum(1 for o in q.options if o)} options…", *skip
                a = pipe.answer(q, retrieved, reranked, stage_times)
                yield "Drawing the evidence…", *skip
                titles = V.titles_of(pipe.library)
                refs = V.candidate_refs(q, a, titles)
                top = refs[0] if refs else {}
                img = V.picture(pipe.library, top.get("chunk_id"), a.doc_hash, a.page)
                crop, why = None, ""
                option = q.options[LETTERS.index(a.letter)]
                try:
                    chunk = pipe.library.chunks([top["chunk_id"]])[0] if top else None
                    if chunk is not None:
                        crop = evidence_for(pipe.library, chunk, q.text, option, a.page).crop
                    ranked = sorted((L for L, o in zip(LETTERS, q.options) if o),
                                    key=lambda L: a.probabilities.get(L, 0.0), reverse=True)[:2]
                    chunks = [c.chunk for c in a.evidence]
                    why = V.why_markdown(q, a, why_this_answer(pipe.library, chunks, q.text,
                                                               dict(zip(LETTERS, q.options)), ranked))
                except (ValueError, FileNotFoundError) as e:  # a page that cannot be drawn: the rest still shows
                    log.info("evidence not shown: %s", e)
        except Exception as e:  # the message only (by the button and as a toast); the previous result stays
            said = message(e, "answering")
            gr.Warning(html.escape(said))
            yield f"⚠ {V.md_escape(said)}", *skip
            return
        times = {"queue wait": wait, **a.timings}
        chart = gr.update(value=V.probs_frame(a.probabilities), label=V.scorer_title(a, ctx.settings.scorer),
                          visible=True)
        asked = {"question": q.text, "options": q.options, "evidence": [c.chunk.chunk_id for c in a.evidence],
                 "probabilities": a.probabilities}
        yield (f"Answered in {time.time() - float(t_click or time.time()):.0f} s.",
               V.answer_markdown(q, a, titles, ctx.settings.scorer), chart, crop, img, why,
               df(V.candidate_rows(refs), V.CANDIDATE_COLUMNS), refs,
               df(V.timing_rows(times), ["Stage", "Seconds"]), gr.update(value=None, visible=False), "", asked)

    def ask_free(pipe, q: Question, t_click, wait: float):
        """A question without options: a short answer grounded in the passages, or "not found"."""
        skip = [gr.skip()] * 11
        yield "No options: finding a short answer — retrieving and reading passages…", *skip
        fa = pipe.ask_free(q.text)
        yield "Drawing the evidence…", *skip
        titles = V.titles_of(pipe.library)
        shown = {c.chunk.chunk_id for c in fa.evidence}
        refs = V.refs_for(fa.candidates, shown, lambda c: answer_page(c, q, fa.text), titles)
        at = fa.evidence_chunk or (fa.closest[0] if fa.closest else None)
        img = crop = None
        if at is not None:
            img = V.picture(pipe.library, at.chunk.chunk_id, at.chunk.doc_hash, fa.page)
            try:
                crop = evidence_for(pipe.library, at.chunk, q.text, fa.text, fa.page).crop
            except (ValueError, FileNotFoundError) as e:
                log.info("evidence not shown: %s", e)
        times = {"queue wait": wait, **fa.timings}
        yield (f"Answered in {time.time() - float(t_click or time.time()):.0f} s.",
               V.free_answer_markdown(fa, titles), gr.update(value=None, visible=False), crop, img,
               V.closest_markdown(fa, titles), df(V.candidate_rows(refs), V.CANDIDATE_COLUMNS), refs,
               df(V.timing_rows(times), ["Stage", "Seconds"]), gr.update(value=None, visible=False), "", {})

    def on_order_check(sid, asked):
        """The last answer re-scored with its options in every cyclic order, over the same passages."""
        need_sid(sid)
        if not asked or not asked.get("options"):
            gr.Warning("Ask a question with options first: the check re-asks the last one.")
            return gr.skip(), gr.skip()
        q = Question("ui", asked["question"], asked["options"])
        with store.open(sid) as pipe:
            chunks = pipe.library.chunks(asked["evidence"])
            if len(chunks) != len(asked["evidence"]):
                gr.Warning("A passage of the last answer is gone (its document was removed): ask again.")
                return gr.skip(), gr.skip()
            check = pipe.order_check(q, [Candidate(c, {}, i) for i, c in enumerate(chunks, 1)], n=6)
        return V.order_markdown(check, asked.get("probabilities") or {}), df(V.order_rows(check), V.ORDER_COLUMNS)

    @handled("showing a candidate's page")
    def on_candidate(sid, refs, evt: gr.SelectData):
        need_sid(sid)
        row = evt.row_value or []
        ref = next((r for r in refs or [] if row and r["rank"] == row[0]), None)
        if ref is None:
            return gr.update(value=None, visible=False), ""
        with store.open(sid) as pipe:
            img = V.picture(pipe.library, ref["chunk_id"], ref["doc_hash"], ref["page"])
        label = V.doc_label(ref.get("title", ""), ref["doc_name"])
        caption = (f"Candidate {ref['rank']}: {V.md_escape(label)}, page {ref['page']}"
                   f" — rerank {ref['scores'].get('rerank', float('nan')):.3f}")
        return gr.update(value=img, visible=True), caption

    fill_btn.click(on_fill, [block], [question, *option_boxes, fill_msg])
    example_set.click(on_example, [example_set], [question, *option_boxes, fill_msg])
    ask_btn.click(on_validate, [sid, question, *option_boxes], None, show_progress="hidden") \
        .success(on_start, None, [ask_status, ask_btn, clicked, order_btn], queue=False, show_progress="hidden") \
        .success(on_ask, [sid, clicked, question, *option_boxes],
                 [ask_status, answer_md, probs_plot, crop_img, page_img, why_md, cands, refs_state, timings, cand_img,
                  cand_caption, asked_state], show_progress_on=[ask_status], **ctx.model_work) \
        .then(lambda asked: (gr.update(interactive=True, value="Answer"), gr.update(interactive=bool(asked)), "",
                             df([], V.ORDER_COLUMNS), gr.update(visible=bool(asked))),
              [asked_state], [ask_btn, order_btn, order_md, order_table, order_panel], queue=False,
              show_progress="hidden") \
        .then(None, None, None, js=SCROLL_TO_ANSWER)
    order_btn.click(lambda: "Re-asking with the options in 6 orders…", None, [order_md], queue=False,
                    show_progress="hidden") \
        .then(handled("checking the option order")(on_order_check), [sid, asked_state], [order_md, order_table],
              show_progress_on=[order_md], **ctx.model_work)
    cands.select(on_candidate, [sid, refs_state], [cand_img, cand_caption])
    return example_set
