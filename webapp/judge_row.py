"""The Ask tab's "Judge this answer" row: the answer shown marked right, or wrong with the right option (or short
answer, or "not in these documents"), document and page; kept with the visitor's library as their own test set
(:mod:`webapp.judged`), which Evaluate runs.

:func:`layout` places the row (:class:`JudgeRow`, hidden until an answer is shown), :func:`on_shown` fills it for
the answer on screen, :func:`on_right` / :func:`on_wrong` save a judgement and say so beside the buttons.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import gradio as gr

from pipeline.evaluation.judged import ERROR_KINDS, NOT_IN_DOCUMENTS, RIGHT, WRONG, JudgedError, Shown
from pipeline.types import LETTERS

from . import views as V
from .common import Context, message
from .judged import judged
from .sessions import valid_session_id

log = logging.getLogger(__name__)


@dataclass
class JudgeRow:
    box: gr.Accordion
    right_btn: gr.Button
    option: gr.Dropdown  # a six-option question: the right letter
    text: gr.Textbox  # a plain question: the right short answer
    not_in: gr.Checkbox
    doc: gr.Dropdown
    page: gr.Number
    kind: gr.Dropdown
    note: gr.Textbox
    wrong_btn: gr.Button
    msg: gr.Markdown
    shown: gr.State  # dataclasses.asdict(shown_of(answer)) of the answer on screen; {} when none

    @property
    def fields(self) -> list:
        return [self.option, self.text, self.not_in, self.doc, self.page, self.kind, self.note]

    @property
    def outputs(self) -> list:
        """What :func:`on_shown` sets."""
        return [self.box, self.right_btn, *self.fields, self.msg]

    @property
    def answer_fields(self) -> list:
        """What :func:`on_not_in` empties (and gives back): the right option or short answer, document, page."""
        return [self.option, self.text, self.doc, self.page]


def layout() -> JudgeRow:
    got = {}
    with gr.Accordion("Judge this answer (kept as your own test set: Evaluate runs it)", open=True, visible=False,
                      elem_id="judge") as got["box"]:
        with gr.Row(equal_height=True):
            got["right_btn"] = gr.Button("✓ Right", elem_id="judge-right", size="sm", scale=0, min_width=90)
            got["option"] = gr.Dropdown([], label="Wrong — the right option", elem_id="judge-option", scale=1,
                                        min_width=120)
            got["text"] = gr.Textbox(label="Wrong — the right short answer (Enter saves)", elem_id="judge-answer",
                                     visible=False, scale=2, lines=1)
            got["not_in"] = gr.Checkbox(label=f"Wrong — {NOT_IN_DOCUMENTS}", elem_id="judge-not-in", scale=1,
                                        min_width=150)
            got["doc"] = gr.Dropdown([], label="Right document", elem_id="judge-doc", scale=2, min_width=160)
            got["page"] = gr.Number(label="Page", precision=0, minimum=1, elem_id="judge-page", scale=0, min_width=80)
        with gr.Row(equal_height=True):
            got["kind"] = gr.Dropdown([("— kind of error (optional) —", ""), *[(k, k) for k in ERROR_KINDS]],
                                      value="", label="Kind of error", elem_id="judge-kind", scale=1, min_width=140)
            got["note"] = gr.Textbox(label="Note (optional; Enter saves as wrong)", elem_id="judge-note", scale=2,
                                     lines=1)
            got["wrong_btn"] = gr.Button("Save as wrong", elem_id="judge-wrong", size="sm", scale=0, min_width=120)
            got["msg"] = gr.Markdown(elem_id="judge-message", latex_delimiters=[])
    return JudgeRow(shown=gr.State({}), **got)


def _question(shown_q) -> tuple[str, list[str]]:
    q = list(shown_q or [""])
    return (q[0] or "").strip(), [(o or "").strip() for o in q[1:]]


def _cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _when(at: str) -> str:
    return at.replace("T", " ").replace("Z", " UTC")


def before_text(r) -> str:
    """A question's earlier judgement, as the row shows it."""
    where = f", {V.md_escape(r.doc)} page {r.page}" if r.doc else ""
    return (f"Judged before as **{r.qid}** ({r.verdict or 'imported'}, {_when(r.judged_at)}): the right answer "
            f"«{V.md_escape(r.right_answer, 80)}»{where}. Saving again replaces it.")


def on_shown(ctx: Context, row: JudgeRow, sid, shown_q, shown):
    """The row for the answer on screen (hidden when none): the options given, the document and page shown
    preset, and the question's earlier judgement when it was judged."""
    if not shown or not valid_session_id(sid):
        return {row.box: gr.update(visible=False), row.msg: ""}
    text, options = _question(shown_q)
    letters = [L for L, o in zip(LETTERS, options) if o]
    titles = {}
    if ctx.store.exists(sid):
        with ctx.store.open(sid) as pipe:
            titles = V.titles_of(pipe.library)
    before = ""
    try:
        old = judged(ctx.store, sid).find(text, options)
        before = before_text(old) if old else ""
    except JudgedError as e:
        before = f"⚠ {V.md_escape(str(e))}"
    not_found = bool(shown.get("not_found"))
    others = letters if not_found else [L for L in letters if L != shown.get("answer")]
    # an answer shown as "not found": "Right" says it is not in these documents (the box would say it again, as
    # "wrong", of an answer that was right)
    return {row.box: gr.update(visible=True),
            row.right_btn: gr.update(value=f"✓ Right: {NOT_IN_DOCUMENTS}" if not_found else "✓ Right"),
            row.option: gr.update(choices=[(f"{L}) {_cut(options[LETTERS.index(L)], 40)}", L) for L in others],
                                  value=None, visible=bool(letters), interactive=True),
            row.text: gr.update(value="", visible=not letters, interactive=True),
            row.not_in: gr.update(value=False, visible=not not_found),
            row.doc: gr.update(choices=[(V.doc_label(t, n), n) for n, t in titles.items()], value=shown.get("doc"),
                               interactive=True),
            row.page: gr.update(value=shown.get("page"), interactive=True), row.kind: "", row.note: "",
            row.msg: before}


def on_not_in(row: JudgeRow, shown, not_in):
    """"Not in these documents" ticked: no right option, document or page — they are emptied and locked (a
    document left filled read as the answer's); unticked, the document and page shown come back."""
    shown = shown or {}
    if not_in:
        return {row.option: gr.update(value=None, interactive=False), row.text: gr.update(value="", interactive=False),
                row.doc: gr.update(value=None, interactive=False), row.page: gr.update(value=None, interactive=False)}
    return {row.option: gr.update(interactive=True), row.text: gr.update(interactive=True),
            row.doc: gr.update(value=shown.get("doc"), interactive=True),
            row.page: gr.update(value=shown.get("page"), interactive=True)}


def _save(ctx: Context, sid, shown_q, shown, verdict: str, **kw) -> str:
    if not valid_session_id(sid):
        return "⚠ Not saved: this page has no library (reload it)."
    if not shown:
        return "⚠ Not saved: there is no answer on screen to judge."
    text, options = _question(shown_q)
    try:
        saved = judged(ctx.store, sid).judge(text, options, verdict, shown=Shown(**shown), **kw)
    except JudgedError as e:
        return f"⚠ Not saved: {V.md_escape(str(e))}."
    except Exception as e:  # said beside the buttons; the judgements kept so far are untouched
        return f"⚠ Not saved: {V.md_escape(message(e, 'saving the judgement'))}"
    r, old = saved.record, saved.replaced
    where = f" ({V.md_escape(r.doc)}, page {r.page})" if r.doc else ""
    said = f"the right answer «{V.md_escape(r.right_answer, 60)}»{where}"
    if r.verdict != verdict:  # "not in these documents" of an answer shown as "not found": the app was right
        said += " (the app said “not found”: that was right)"
    if old:
        return f"✓ Updated **{r.qid}** (judged before: {old.verdict or 'imported'}) — judged {r.verdict}, {said}."
    return f"✓ Saved as **{r.qid}** — judged {r.verdict}, {said}."


def on_right(ctx: Context, row: JudgeRow, sid, shown_q, shown):
    return {row.msg: _save(ctx, sid, shown_q, shown, RIGHT)}


def on_wrong(ctx: Context, row: JudgeRow, sid, shown_q, shown, option, text, not_in, doc, page, kind, note):
    _, options = _question(shown_q)
    answer = None if not_in else ((option or "") if any(options) else (text or "").strip()) or None
    try:
        page = int(page) if page not in (None, "") else None
    except (TypeError, ValueError):
        page = None
    return {row.msg: _save(ctx, sid, shown_q, shown, WRONG, answer=answer, not_in_documents=bool(not_in),
                           doc=doc or None, page=page, error_kind=kind or "", note=note or "")}


def wire(ctx: Context, row: JudgeRow, sid: gr.State, shown_q: gr.State) -> None:
    from .common import QUIET, bind

    row.right_btn.click(bind(on_right, ctx, row), [sid, shown_q, row.shown], [row.msg], **QUIET)
    row.not_in.input(bind(on_not_in, row), [row.shown, row.not_in], row.answer_fields, **QUIET)
    wrong = [sid, shown_q, row.shown, *row.fields]
    for trigger in (row.wrong_btn.click, row.note.submit, row.text.submit):
        trigger(bind(on_wrong, ctx, row), wrong, [row.msg], **QUIET)
