"""The Library tab: upload PDFs (or the sample corpus) with live progress, list and remove documents.

An upload is done once the document is searchable (BM25); its vectors are
computed in the background, and while any document is still embedding a timer
refreshes the documents table every few seconds until each shows "indexed".
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from pipeline.errors import IngestError
from pipeline.documents.ingest import check_size, list_pdfs, safe_name

from . import views as V
from .common import Context, df, handled, message, need_sid, user_error


@dataclass
class LibraryTab:
    docs: gr.Dataframe
    remove_pick: gr.Dropdown
    refresh: gr.Timer

    @property
    def load_outputs(self) -> list:
        return [self.docs, self.remove_pick, self.refresh]


# Remove asks first; the answer goes to the hidden "confirmed" box ("yes" or "no")
CONFIRM_REMOVE = ("(doc, sid, _) => [doc, sid, (!doc || window.confirm('Remove this document from your library? "
                  "Its pages and passages are deleted.')) ? 'yes' : 'no']")


def library_views(ctx: Context, sid: str, keep: str | None = None):
    """The documents table, the remove dropdown's choices (``keep``: the document picked, kept while it is
    there), and the refresh timer (on while any is embedding)."""
    docs = []
    if ctx.store.exists(sid):
        with ctx.store.open(sid) as pipe:
            docs = pipe.library.documents()
    choices = V.doc_choices(docs)
    pick = keep if keep in {value for _, value in choices} else None
    return (df(V.doc_rows(docs), V.DOC_COLUMNS), gr.update(choices=choices, value=pick),
            gr.Timer(active=any(d.state != "indexed" for d in docs)))


def build(ctx: Context, sid: gr.State) -> LibraryTab:
    s, store = ctx.settings, ctx.store
    with gr.Row():
        upload = gr.File(label=f"Upload PDFs (many at once; up to {s.max_upload_mb:g} MB each)", file_count="multiple",
                         file_types=[".pdf"], elem_id="upload", scale=3)
        with gr.Column(scale=1):
            sample_btn = gr.Button("Load the sample corpus", elem_id="load-sample")
            gr.Markdown(f"Indexes the PDFs in `{ctx.sample_dir.as_posix()}/`.")
    status = gr.Dataframe(df([], V.STATUS_COLUMNS), label="Indexing", interactive=False, elem_id="ingest-status",
                          wrap=True)
    docs = gr.Dataframe(df([], V.DOC_COLUMNS), label="Documents", interactive=False, elem_id="documents",
                        wrap=True)
    refresh = gr.Timer(3, active=False)
    with gr.Row():
        remove_pick = gr.Dropdown(label="Document to remove", choices=[], elem_id="remove-pick", scale=3)
        remove_btn = gr.Button("Remove", variant="stop", elem_id="remove", scale=1)
    lib_msg = gr.Markdown(elem_id="library-message")
    confirmed = gr.Textbox(visible=False)

    def index_files(sid: str, items: list[tuple[str, Path]]):
        """Index (name, path) pairs one by one, yielding the status table as each moves on."""
        rows = [[name, "queued", ""] for name, _ in items]
        no_change = (gr.skip(), gr.skip(), gr.skip(), gr.skip())
        yield df(rows, V.STATUS_COLUMNS), *no_change
        if not items:
            return
        with store.open(sid) as pipe:
            for i, (name, path) in enumerate(items):
                try:  # the size is checked before the file is read
                    check_size(name, path.stat().st_size, s.max_upload_mb)
                    data = path.read_bytes()
                except (IngestError, OSError) as e:
                    why = V.failure_text(name, e) if isinstance(e, IngestError) else \
                        f"the file could not be read ({e.strerror or e})"
                    rows[i][1:] = ["failed", why]
                    yield df(rows, V.STATUS_COLUMNS), *no_change
                    continue
                for kind, val in V.stream(lambda report, data=data, name=name: pipe.add_pdf(data, name, progress=report)):
                    if kind == "progress":
                        rows[i][1] = V.stage_text(*val)
                    elif kind == "done":
                        warn = f"; {'; '.join(val.warnings)}" if val.warnings else ""
                        same = f"same file as {val.name}; " if val.duplicate and val.name != safe_name(name) else ""
                        later = "; its vectors are being added (the Documents table shows when it is indexed)" \
                            if val.state == "searchable" else ""
                        rows[i][1:] = ["already in the library" if val.duplicate else val.state,
                                       f"{same}{V.plural(val.n_pages, 'page')}, {V.plural(val.n_chunks, 'chunk')}"
                                       f"{warn}{later}"]
                    else:
                        rows[i][1:] = ["failed", V.failure_text(name, val) if isinstance(val, IngestError)
                                       else message(val, f"indexing {name}")]
                    if kind == "done":  # the documents table grows as each document is indexed
                        got = pipe.library.documents()
                        yield (df(rows, V.STATUS_COLUMNS), df(V.doc_rows(got), V.DOC_COLUMNS),
                               gr.update(choices=V.doc_choices(got), value=None),
                               gr.Timer(active=any(d.state != "indexed" for d in got)), gr.skip())
                    else:
                        yield df(rows, V.STATUS_COLUMNS), *no_change
        yield df(rows, V.STATUS_COLUMNS), *library_views(ctx, sid), None  # the upload box is emptied for the next files

    @handled("indexing the upload")
    def on_upload(files, sid):
        need_sid(sid)
        yield from index_files(sid, [(Path(f).name, Path(f)) for f in (files or [])])

    @handled("indexing the sample corpus")
    def on_sample(sid):
        need_sid(sid)
        pdfs = list_pdfs(ctx.sample_dir) if ctx.sample_dir.is_dir() else []
        if not pdfs:
            raise user_error(f"No sample corpus found in {ctx.sample_dir}/.")
        yield from index_files(sid, [(p.name, p) for p in pdfs])

    @handled("removing a document")
    def on_remove(doc_hash, sid, confirmed="yes"):
        need_sid(sid)
        if confirmed != "yes":  # "Cancel" in the confirmation
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        if not doc_hash:  # a toast; the table and the pick stay as they are
            gr.Warning("Pick a document to remove first.")
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        with store.open(sid) as pipe:
            info = pipe.library.find(doc_hash)
            pipe.library.remove(doc_hash)
        msg = f"Removed {V.md_escape(info.name)}." if info else "That document was already gone."
        return msg, *library_views(ctx, sid)

    @handled("refreshing the documents")
    def on_tick(sid, pick):
        need_sid(sid)
        return library_views(ctx, sid, keep=pick)  # the refresh must not drop what the user picked

    upload.upload(on_upload, [upload, sid], [status, docs, remove_pick, refresh, upload], show_progress="minimal",
                  **ctx.model_work)
    sample_btn.click(on_sample, [sid], [status, docs, remove_pick, refresh, upload], show_progress="minimal",
                     **ctx.model_work)
    remove_btn.click(on_remove, [remove_pick, sid, confirmed], [lib_msg, docs, remove_pick, refresh],
                     js=CONFIRM_REMOVE)
    refresh.tick(on_tick, [sid, remove_pick], [docs, remove_pick, refresh], show_progress="hidden")
    return LibraryTab(docs, remove_pick, refresh)
