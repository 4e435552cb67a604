"""Evaluate's ready set "Your judged questions": the visitor's judgements from the Ask tab (:mod:`webapp.judged`)
run without a file, listed (remove by id), downloaded as CSV and uploaded back.

A set with both kinds is two runs: the six-option questions (the competition's format and metric; one judged "not
in these documents" keeps its options, right when the run says "not found") and the plain ones (the free-form
format); each has its own button, shown only when it has a question, and the list says which run each question
is in. :func:`views` is what the page shows
(on load, on opening the tab, after a change); :func:`on_run_set` reads a set for Evaluate's run as
``read_csv`` reads a file.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import gradio as gr

from pipeline.errors import UserError
from pipeline.evaluation.judged import JudgedError

from . import views as V
from .common import Context, df, message
from .files import drop_upload
from .judged import downloads, judged, ready_set
from .sessions import valid_session_id

log = logging.getLogger(__name__)

COLUMNS = ["ID", "Question", "Judgement", "Right answer", "Document", "Page", "Run", "When"]
# all of it in view at 1280 px, each header and word whole ("Judgement" with its sort button, and "six-option",
# need 110 px: at 85 and 90 px they broke)
WIDTHS = ["55px", "255px", "110px", "150px", "250px", "50px", "110px", "170px"]
MARK = "⚑ judged after this run — "  # before a question's text in a run's table


@dataclass
class JudgedSet:
    run_options: gr.Button
    run_free: gr.Button
    box: gr.Accordion
    table: gr.Dataframe
    remove_id: gr.Textbox
    remove_btn: gr.Button
    files: gr.File
    upload: gr.File
    msg: gr.Markdown

    @property
    def outputs(self) -> list:
        """What :func:`views` sets."""
        return [self.run_options, self.run_free, self.box, self.table, self.files]


def buttons() -> dict:
    """The two run buttons (placed beside "Run the sample questions"); :func:`list_layout` adds the list."""
    got = {}
    with gr.Row():
        got["run_options"] = gr.Button("Run your judged questions", elem_id="run-judged", size="sm", visible=False)
        got["run_free"] = gr.Button("Run your judged plain questions", elem_id="run-judged-free", size="sm",
                                    visible=False)
    return got


def list_layout(got: dict) -> JudgedSet:
    with gr.Accordion("Your judged questions (0)", open=False, elem_id="judged-list") as got["box"]:
        got["table"] = gr.Dataframe(df([], COLUMNS), interactive=False, elem_id="judged-table", wrap=True,
                                    max_height=300, label="Judged in the Ask tab (newest first)",
                                    column_widths=WIDTHS)
        with gr.Row():
            with gr.Column(scale=1, min_width=200):
                got["remove_id"] = gr.Textbox(label="Remove a judged question: its ID (Enter removes)",
                                              elem_id="judged-remove-id", placeholder="J001")
                got["remove_btn"] = gr.Button("Remove", elem_id="judged-remove", size="sm", variant="stop")
            got["files"] = gr.File(label="Download as CSV (six-option: the competition's format, “none” for not "
                                         "in these documents; plain: free-form)", file_count="multiple",
                                   interactive=False,
                                   elem_id="judged-downloads", scale=2)
            got["upload"] = gr.File(label="Upload a judged questions CSV", file_types=[".csv"],
                                    elem_id="judged-upload", scale=2)
        got["msg"] = gr.Markdown(elem_id="judged-message", latex_delimiters=[])
    return JudgedSet(**got)


def _rows(records, titles: dict[str, str]) -> list[list]:
    return [[r.qid, r.question, r.verdict or "imported", r.right_answer,
             V.doc_label(titles.get(r.doc or "", ""), r.doc) if r.doc else "", r.page or "",
             "plain" if r.free else "six-option", r.judged_at.replace("T", " ").replace("Z", " UTC")]
            for r in records]


def views(ctx: Context, js: JudgedSet, sid) -> dict:
    """The buttons (one per kind that has a question), the list and the CSVs to download."""
    try:
        records = judged(ctx.store, sid).list() if valid_session_id(sid) else []
    except JudgedError as e:  # a damaged file: said, never written over
        return {js.box: gr.update(label=f"Your judged questions: ⚠ {e}")}
    free = sum(r.free for r in records)
    opts = len(records) - free
    titles = {}
    if records and ctx.store.exists(sid):
        with ctx.store.open(sid) as pipe:
            titles = V.titles_of(pipe.library)
    parts = ", ".join(p for p in (f"{opts} six-option" if opts else "", f"{free} plain" if free else "") if p)
    return {js.run_options: gr.update(value=f"Run your judged questions ({opts} six-option)", visible=opts > 0),
            js.run_free: gr.update(value=f"Run your judged plain questions ({free}: free-form)", visible=free > 0),
            js.box: gr.update(label=f"Your judged questions ({len(records)}{': ' + parts if parts else ''})"
                                    + (" — two runs, one per kind" if opts and free else "")),
            js.table: df(_rows(records, titles), COLUMNS),
            js.files: downloads(ctx.store, ctx.files, sid) if records else None}


def on_run_set(ctx: Context, free: bool, parsed_out, message_out, sid):
    """The judged questions of one kind as Evaluate's ``parsed`` (questions, notes, free); never raises (a
    problem is said beside Run, as for a CSV)."""
    kind = "plain" if free else "six-option"
    try:
        if not valid_session_id(sid):
            raise JudgedError("this page has no library (reload it)")
        questions, notes, free = ready_set(ctx.store, sid, free)
        if not questions:
            left = (": " + "; ".join(notes)) if notes else ""
            raise JudgedError(f"no judged {kind} question can run in this library{left}")
        said = f"Your judged {kind} questions: {V.plural(len(questions), 'question')}"
        if notes:
            said += f"; {len(notes)} left out (see below)"
        return {parsed_out: (questions, notes, free), message_out: said + "."}
    except Exception as e:
        said = str(e) if isinstance(e, JudgedError) else message(e, "reading your judged questions")
        return {parsed_out: None, message_out: f"⚠ **Not run:** {V.md_escape(said, 600)}"}


def on_remove(ctx: Context, js: JudgedSet, sid, qid):
    qid = (qid or "").strip().upper()
    if not valid_session_id(sid):
        return {js.msg: "⚠ This page has no library (reload it)."}
    if not qid:
        return {js.msg: "⚠ Type the ID of the judged question to remove (J001…)."}
    try:
        gone = judged(ctx.store, sid).remove(qid)
    except JudgedError as e:
        return {js.msg: f"⚠ {V.md_escape(str(e))}"}
    said = f"Removed {V.md_escape(gone.qid)}: «{V.md_escape(gone.question, 80)}»." if gone \
        else f"⚠ No judged question {V.md_escape(qid)}: nothing removed."
    return {js.msg: said, js.remove_id: "" if gone else qid, **views(ctx, js, sid)}


def on_upload(ctx: Context, js: JudgedSet, sid, path):
    if not path:
        return gr.skip()
    try:
        if not valid_session_id(sid):
            raise JudgedError("this page has no library (reload it)")
        with open(path, "rb") as f:
            data = f.read()
        report = judged(ctx.store, sid).import_csv(data)
        said = "Uploaded: " + V.md_escape(report.message)
        if report.problems:
            said += "".join(f"\n- {V.md_escape(p, 300)}" for p in report.problems[:20])
    except UserError as e:  # a file with no usable row: said, nothing changed
        said = "⚠ Not uploaded: " + V.md_escape(str(e), 600)
    except Exception as e:
        said = "⚠ Not uploaded: " + V.md_escape(message(e, "uploading judged questions"), 600)
    finally:
        drop_upload(path)
    return {js.msg: said, js.upload: None, **views(ctx, js, sid)}


def judged_after(ctx: Context, sid, run: dict) -> set[str]:
    """The questions of a run judged after it began (the run's start: its questions.json's time), whose
    question is the same as the run's (an uploaded CSV's ids may be J-numbers too)."""
    try:
        start = (run["dir"] / "questions.json").stat().st_mtime
        store = judged(ctx.store, sid)
        ids = store.judged_after(start)
    except (OSError, KeyError, JudgedError, ValueError) as e:
        log.info("judged-after not marked: %s", e)
        return set()
    return {q for q in ids if (r := store.get(q)) and run["questions"].get(q, {}).get("text") == r.question}


def marked(rows: list[list], after: set[str]) -> list[list]:
    """A run's table rows with those judged after the run marked before their question."""
    return [[r[0], MARK + str(r[1]), *r[2:]] if r and r[0] in after else r for r in rows]


def wire(ctx: Context, js: JudgedSet, sid: gr.State) -> None:
    from .common import QUIET, bind

    for trigger in (js.remove_btn.click, js.remove_id.submit):
        trigger(bind(on_remove, ctx, js), [sid, js.remove_id], [js.msg, js.remove_id, *js.outputs], **QUIET)
    js.upload.upload(bind(on_upload, ctx, js), [sid, js.upload], [js.msg, js.upload, *js.outputs],
                     show_progress="hidden")
