"""The Library tab: upload PDFs (or the sample corpus) with live progress, list and remove documents.

An upload is done once the document is searchable (BM25); its vectors are
computed in the background, and while any document is still embedding a timer
refreshes the documents table (and the upload's status rows) every few seconds
until each shows "indexed".

:func:`layout` places the components (:class:`LibraryTab`), the ``on_*`` handlers
return ``{component: value}``, :func:`wire` connects them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from pipeline.documents.ingest import check_size, list_pdfs, safe_name
from pipeline.errors import IngestError

from . import views as V
from .common import Context, bind, df, handled, message, need_sid, user_error
from .files import drop_upload

# Remove asks first; the answer goes to the hidden "confirmed" box ("yes" or "no")
CONFIRM_REMOVE = ("(doc, sid, _) => [doc, sid, (!doc || window.confirm('Remove this document from your library? "
                  "Its pages and passages are deleted.')) ? 'yes' : 'no']")
LATER = "; its vectors are being added (the Documents table shows when it is indexed)"


@dataclass
class LibraryTab:
    upload: gr.File
    sample_btn: gr.Button
    status: gr.Dataframe
    docs: gr.Dataframe
    refresh: gr.Timer
    remove_row: gr.Row
    remove_pick: gr.Dropdown
    remove_btn: gr.Button
    message: gr.Markdown
    confirmed: gr.Textbox

    @property
    def load_outputs(self) -> list:
        """What :func:`library_views` sets (the documents table first: the load API's second value)."""
        return [self.docs, self.remove_pick, self.refresh, self.remove_row]


def layout(ctx: Context) -> LibraryTab:
    s = ctx.settings
    with gr.Row():
        upload = gr.File(label=f"Upload PDFs (many at once; up to {s.limits.max_upload_mb:g} MB each)", file_count="multiple",
                         file_types=[".pdf"], elem_id="upload", scale=3)
        with gr.Column(scale=1):
            sample_btn = gr.Button("Load the sample corpus", elem_id="load-sample")
            gr.Markdown(f"Indexes the PDFs in `{ctx.sample_dir.as_posix()}/`.")
    # shares of the width, so long details wrap inside their cell instead of pushing columns off the screen, and
    # every header ("Pages", "Chunks") keeps its word whole at 1280 px
    status = gr.Dataframe(df([], V.STATUS_COLUMNS), label="Indexing", interactive=False, elem_id="ingest-status",
                          wrap=True, column_widths=["35%", "13%", "52%"])
    docs = gr.Dataframe(df([], V.DOC_COLUMNS), label="Documents", interactive=False, elem_id="documents",
                        wrap=True, column_widths=["44%", "22%", "8%", "9%", "17%"])
    refresh = gr.Timer(3, active=False)
    with gr.Row(visible=False) as remove_row:  # shown once the library holds a document
        remove_pick = gr.Dropdown(label="Document to remove", choices=[], elem_id="remove-pick", scale=3)
        remove_btn = gr.Button("Remove", variant="stop", elem_id="remove", scale=1)
    msg = gr.Markdown(elem_id="library-message")
    confirmed = gr.Textbox(visible=False)
    return LibraryTab(upload, sample_btn, status, docs, refresh, remove_row, remove_pick, remove_btn, msg, confirmed)


def library_views(ctx: Context, ui: LibraryTab, sid: str, keep: str | None = None, docs: list | None = None) -> dict:
    """The documents table, the remove dropdown's choices (``keep``: the document picked, kept while it is
    there) and the Remove row (only when there is something to remove), and the refresh timer (on while any
    document is embedding). ``docs``: the library's documents when the caller has them."""
    if docs is None:
        docs = []
        if ctx.store.exists(sid):
            with ctx.store.open(sid) as pipe:
                docs = pipe.library.documents()
    choices = V.doc_choices(docs)
    pick = keep if keep in {value for _, value in choices} else None
    return {ui.docs: df(V.doc_rows(docs), V.DOC_COLUMNS), ui.remove_pick: gr.update(choices=choices, value=pick),
            ui.refresh: gr.Timer(active=any(d.state != "indexed" for d in docs)),
            ui.remove_row: gr.update(visible=bool(docs))}


# ---- indexing ------------------------------------------------------------------------------
def _read(name: str, path: Path, max_mb: float) -> tuple[bytes | None, str]:
    """The file's bytes, or None and why not (the size is checked before the file is read)."""
    try:
        check_size(name, path.stat().st_size, max_mb)
        return path.read_bytes(), ""
    except IngestError as e:
        return None, V.failure_text(name, e)
    except OSError as e:
        return None, f"the file could not be read ({e.strerror or e})"


def _done_cells(name: str, info) -> list[str]:
    """The status row's state and details once a document is in the library."""
    warn = f"; {'; '.join(info.warnings)}" if info.warnings else ""
    same = f"same file as {info.name}; " if info.duplicate and info.name != safe_name(name) else ""
    later = LATER if info.state == "searchable" else ""
    return ["already in the library" if info.duplicate else info.state,
            f"{same}{V.plural(info.n_pages, 'page')}, {V.plural(info.n_chunks, 'chunk')}{warn}{later}"]


def _index_one(ctx: Context, ui: LibraryTab, pipe, rows: list[list], i: int, name: str, data: bytes):
    """Index one file, yielding the status table as it moves on, and the documents table once it is in."""
    add = lambda report: pipe.add_pdf(data, name, progress=report)  # noqa: E731
    for kind, val in V.stream(add):
        if kind == "progress":
            rows[i][1] = V.stage_text(*val)
            yield {ui.status: df(rows, V.STATUS_COLUMNS)}
            continue
        if kind == "done":
            rows[i][1:] = _done_cells(name, val)
        else:
            rows[i][1:] = ["failed", V.failure_text(name, val) if isinstance(val, IngestError)
                           else message(val, f"indexing {name}")]
        # the documents table grows as each document is indexed; the timer waits for the upload to end
        got = pipe.library.documents()
        yield {ui.status: df(rows, V.STATUS_COLUMNS), **library_views(ctx, ui, "", docs=got),
               ui.refresh: gr.Timer(active=False)}


def interrupted(ctx: Context, sid: str) -> list[str]:
    """The documents the server was reading into this library when it stopped and never stored (said once)."""
    names = ctx.store.interrupted(sid)
    if names and ctx.store.exists(sid):
        with ctx.store.open(sid) as pipe:
            stored = {d.name for d in pipe.library.documents()}
        names = [n for n in names if safe_name(n) not in stored]  # stored just before the stop: not lost
    return names


def interrupted_text(names: list[str]) -> str:
    """What the visitor is told of the documents the server was reading when it stopped (never stored)."""
    return (f"**Not indexed: upload {'it' if len(names) == 1 else 'them'} again.** The server stopped while reading "
            + ", ".join(V.md_escape(n) for n in names) + "; nothing of "
            + ("it" if len(names) == 1 else "them") + " was kept.")


def index_files(ctx: Context, ui: LibraryTab, sid: str, items: list[tuple[str, Path]]):
    """Index (name, path) pairs one by one, yielding the status table as each moves on. While it runs the batch
    is recorded with the library, so a server stopped half-way names what it never stored on the next visit."""
    rows = [[name, "queued", ""] for name, _ in items]
    yield {ui.status: df(rows, V.STATUS_COLUMNS), ui.refresh: gr.Timer(active=False)}
    if not items:
        return
    with ctx.store.open(sid) as pipe:
        rec = ctx.store.begin_indexing(sid, [name for name, _ in items])
        try:
            for i, (name, path) in enumerate(items):
                data, why = _read(name, path, ctx.settings.limits.max_upload_mb)
                if data is None:
                    rows[i][1:] = ["failed", why]
                    yield {ui.status: df(rows, V.STATUS_COLUMNS)}
                else:
                    yield from _index_one(ctx, ui, pipe, rows, i, name, data)
                ctx.store.indexing_left(rec, [name for name, _ in items[i + 1:]])
        finally:
            ctx.store.end_indexing(rec)
    # the upload box is emptied for the next files
    yield {ui.status: df(rows, V.STATUS_COLUMNS), **library_views(ctx, ui, sid), ui.upload: None}


@handled("indexing the upload")
def on_upload(ctx: Context, ui: LibraryTab, files, sid):
    """Index the uploaded files; each is deleted from Gradio's upload folder once read (the library keeps it)."""
    try:
        need_sid(sid)
        yield from index_files(ctx, ui, sid, [(Path(f).name, Path(f)) for f in (files or [])])
    finally:
        for f in files or []:
            drop_upload(f)


@handled("indexing the sample corpus")
def on_sample(ctx: Context, ui: LibraryTab, sid):
    need_sid(sid)
    pdfs = list_pdfs(ctx.sample_dir) if ctx.sample_dir.is_dir() else []
    if not pdfs:
        raise user_error(f"No sample corpus found in {ctx.sample_dir}/.")
    yield from index_files(ctx, ui, sid, [(p.name, p) for p in pdfs])


@handled("removing a document")
def on_remove(ctx: Context, ui: LibraryTab, doc_hash, sid, confirmed="yes"):
    need_sid(sid)
    if confirmed != "yes":  # "Cancel" in the confirmation
        return gr.skip()  # no change (an empty dict is not read as one by Gradio)
    if not doc_hash:  # a toast; the table and the pick stay as they are
        gr.Warning("Pick a document to remove first.")
        return gr.skip()  # no change (an empty dict is not read as one by Gradio)
    with ctx.store.open(sid) as pipe:
        info = pipe.library.find(doc_hash)
        pipe.library.remove(doc_hash)
    ctx.files.drop_document(sid, doc_hash)  # its page images shown in Ask and Evaluate
    said = f"Removed {V.md_escape(info.name)}." if info else "That document was already gone."
    return {ui.message: said, **library_views(ctx, ui, sid)}


def status_after(rows: list[list], docs) -> list[list] | None:
    """The upload's status rows with each "searchable" document that is now indexed marked so (None: no change)."""
    indexed = {d.name for d in docs if d.state == "indexed"}
    changed = False
    for row in rows:
        if len(row) == 3 and row[1] == "searchable" and safe_name(str(row[0])) in indexed:
            row[1], row[2] = "indexed", str(row[2]).replace(LATER, "")
            changed = True
    return rows if changed else None


@handled("refreshing the documents")
def on_tick(ctx: Context, ui: LibraryTab, sid, pick, status):
    """The documents table (keeping what the user picked) and the upload's rows that are now indexed."""
    need_sid(sid)
    docs = []
    if ctx.store.exists(sid):
        with ctx.store.open(sid) as pipe:
            docs = pipe.library.documents()
    out = library_views(ctx, ui, sid, keep=pick, docs=docs)
    rows = status_after(status.values.tolist() if status is not None and len(status) else [], docs)
    if rows is not None:
        out[ui.status] = df(rows, V.STATUS_COLUMNS)
    return out


def wire(ctx: Context, ui: LibraryTab, sid: gr.State) -> None:
    indexing = [ui.status, *ui.load_outputs, ui.upload]
    ui.upload.upload(bind(on_upload, ctx, ui), [ui.upload, sid], indexing, show_progress="minimal",
                     api_name="on_upload", **ctx.model_work)
    ui.sample_btn.click(bind(on_sample, ctx, ui), [sid], indexing, show_progress="minimal", **ctx.model_work)
    ui.remove_btn.click(bind(on_remove, ctx, ui), [ui.remove_pick, sid, ui.confirmed],
                        [ui.message, *ui.load_outputs], js=CONFIRM_REMOVE)
    ui.refresh.tick(bind(on_tick, ctx, ui), [sid, ui.remove_pick, ui.status], [ui.status, *ui.load_outputs],
                    show_progress="hidden")
