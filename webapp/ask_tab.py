"""The Ask tab: a question and six options (typed, pasted as one block, or an example) → the answer,
its probabilities, the evidence page with the chunk highlighted, every candidate, and stage times."""
from __future__ import annotations

import gradio as gr

from pipeline.types import LETTERS, Question

from . import views as V
from .blocks import BlockError, parse_block
from .common import Context, df, handled, need_sid, user_error


def build(ctx: Context, sid: gr.State) -> None:
    store, examples = ctx.store, ctx.examples
    refs_state = gr.State([])
    with gr.Row():
        with gr.Column(scale=2):
            block = gr.Textbox(label="Paste a question with its options (one block)", lines=6,
                               placeholder="Question?\nA) …\nB) …\nC) …\nD) …\nE) …\nF) …", elem_id="block")
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
            probs_plot = gr.BarPlot(None, x="option", y="probability", y_lim=[0, 1], label="Probabilities", sort="x",
                                    elem_id="probabilities", height=260)
            timings = gr.Dataframe(df([], ["Stage", "Seconds"]), label="Time per stage (s)", interactive=False,
                                   elem_id="timings")
        with gr.Column(scale=2):
            page_img = gr.Image(label="Evidence page", type="pil", format="png", interactive=False,
                                elem_id="evidence-page", height=860)
    cands = gr.Dataframe(df([], V.CANDIDATE_COLUMNS), label="Ranked candidates — select a row to see its page",
                         interactive=False, elem_id="candidates", wrap=True, max_height=520,
                         column_widths=V.CANDIDATE_WIDTHS)
    cand_caption = gr.Markdown(elem_id="candidate-caption", latex_delimiters=[])
    cand_img = gr.Image(label="Selected candidate's page", type="pil", format="png", interactive=False,
                        elem_id="candidate-page", height=860, visible=False)

    def on_fill(block):
        try:
            p = parse_block(block)
        except BlockError as e:
            raise user_error(str(e)) from None
        note = ("Filled. " + "; ".join(p.notes)) if p.notes else "Filled."
        return p.question, *p.options, note

    def on_example(index):
        q = examples[int(index)]
        return q.text, *q.options, f"Example {V.md_escape(q.qid)} filled."

    @handled("answering")
    def on_ask(sid, question, *options):
        need_sid(sid)
        q = Question("ui", (question or "").strip(), [(o or "").strip() for o in options])
        if not q.text:
            raise user_error("Write a question first (or paste a block and press Fill).")
        if sum(1 for o in q.options if o) < 2:
            raise user_error("Give at least two options.")
        if not store.exists(sid):
            raise user_error("The library is empty: add PDFs on the Library tab first.")
        with store.open(sid) as pipe:
            a = pipe.ask(q)
            refs = V.candidate_refs(q, a)
            top = refs[0] if refs else {}
            img = V.picture(pipe.library, top.get("chunk_id"), a.doc_hash, a.page)
        return (V.answer_markdown(q, a), V.probs_frame(a.probabilities), img,
                df(V.candidate_rows(refs), V.CANDIDATE_COLUMNS), refs,
                df(V.timing_rows(a.timings), ["Stage", "Seconds"]), gr.update(value=None, visible=False), "")

    @handled("showing a candidate's page")
    def on_candidate(sid, refs, evt: gr.SelectData):
        need_sid(sid)
        row = evt.row_value or []
        ref = next((r for r in refs or [] if row and r["rank"] == row[0]), None)
        if ref is None:
            return gr.update(value=None, visible=False), ""
        with store.open(sid) as pipe:
            img = V.picture(pipe.library, ref["chunk_id"], ref["doc_hash"], ref["page"])
        caption = (f"Candidate {ref['rank']}: {V.md_escape(ref['doc_name'])}, page {ref['page']}"
                   f" — rerank {ref['scores'].get('rerank', float('nan')):.3f}")
        return gr.update(value=img, visible=True), caption

    fill_btn.click(on_fill, [block], [question, *option_boxes, fill_msg])
    example_set.click(on_example, [example_set], [question, *option_boxes, fill_msg])
    ask_btn.click(on_ask, [sid, question, *option_boxes],
                  [answer_md, probs_plot, page_img, cands, refs_state, timings, cand_img, cand_caption],
                  **ctx.model_work)
    cands.select(on_candidate, [sid, refs_state], [cand_img, cand_caption])
