"""Stage 3 — the library: one folder's index, put together from its parts.

* :class:`~pipeline.index.store.DocumentStore` — documents, pages with word boxes and chunk text (SQLite), the PDFs;
* :class:`~pipeline.index.vectors.VectorIndex` — the chunk vectors (embedded Chroma, or a Chroma server);
* :class:`~pipeline.index.lexical.LexicalIndex` — BM25 over the chunk text, rebuilt in memory, and the chunks'
  document-frequency statistics, kept per document;
* :class:`~pipeline.index.indexer.Indexer` — adds a PDF (the only part that needs an embedder).

Progressive indexing: a document is listed once its rows are stored, in one
SQLite transaction — from then on it is ``searchable`` (BM25); a background
thread (one per library, started when there is something to embed; one batch
at a time in the whole process) embeds its chunks batch by batch, each batch's
vectors written and then marked in SQLite, and the document is ``indexed``
when every chunk has its vector. Rows and files of a document never listed,
and vectors of chunks of no listed document, are swept away on open; chunks
whose vectors were written but not yet marked (a crash in between) are marked
on open, and the rest are embedded again in the background: a SIGKILL at any
moment leaves every document usable at the level it reached, and nothing
stored is embedded twice. ``add(..., wait=True)`` (the default unless the
library was opened with ``background=True``) returns once the document is
indexed; ``wait_indexed()`` waits for everything. Reading needs no embedder:
``Library(root, None, settings)`` (it embeds nothing).
"""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from ..backends.base import Embedder
from ..settings import Settings
from ..types import Chunk, Page
from .indexer import Indexer, Progress
from .lexical import LexicalIndex
from .store import DocInfo, DocumentStore
from .vectors import VectorIndex

log = logging.getLogger(__name__)
# background embedding runs one batch at a time in the whole process, so it adds at most one model call
# to the web app's model queue (and a question waits for at most one batch on the shared embedder)
_BACKGROUND_GATE = threading.Lock()


class Library:
    def __init__(self, root: Path | str, embedder: Embedder | None, settings: Settings, background: bool = False):
        """``background``: ``add`` returns once the document is searchable (else once it is indexed)."""
        self.root = Path(root)
        self.settings, self.background = settings, background
        self.lock = threading.RLock()
        self.store = DocumentStore(self.root, settings.fingerprint())
        self.vectors = VectorIndex(self.root, settings, self.store.library_id, self.store.n_embedded_chunks())
        self.lexical = LexicalIndex(self.store.chunk_texts, settings.search.lexical_norm, listed=self.store.listed,
                                    doc_texts=self._chunk_texts_of)
        self.indexer = (Indexer(self.store, self.vectors, self.lexical, embedder, settings, self.lock,
                                on_added=self.embed_in_background) if embedder is not None else None)
        self._sweep()
        self._changed = threading.Condition()  # notified after each stored batch and on a worker error
        self._run = threading.Event()  # cleared: the background embedding pauses between batches
        self._run.set()
        self._stop, self._wake = threading.Event(), threading.Event()
        self._error: Exception | None = None
        self._worker: threading.Thread | None = None
        if self.store.n_pending():  # a crash or a close stopped the embedding: it resumes
            self.embed_in_background()

    def _sweep(self) -> None:
        """Remove vectors, rows and files of documents never listed; mark vectors written but not yet marked."""
        self.vectors.sweep(self.store.listed())
        self.store.sweep()
        pending = [c.chunk_id for c in self.store.pending()]
        if pending:
            self.store.mark_embedded(sorted(self.vectors.present(pending)))

    def close(self) -> None:
        """Stop the background embedding (after its batch), release SQLite and the embedded Chroma (best effort)."""
        self._stop.set()
        self._wake.set()
        self._run.set()
        if self._worker is not None:
            self._worker.join()
        self.store.close()
        self.vectors.close()

    def add(self, data: bytes, name: str, progress: Progress | None = None, wait: bool | None = None) -> DocInfo:
        """Index one PDF (see :class:`Indexer`): returns once it is searchable, or indexed if ``wait``
        (default: not ``background``); a library opened without an embedder cannot."""
        if self.indexer is None:
            raise RuntimeError("this library was opened for reading only (no embedder)")
        info = self.indexer.add(data, name, progress)
        if not (wait if wait is not None else not self.background) or info.state == "indexed":
            return info
        self.wait_indexed(info.doc_hash, progress)
        info.n_embedded = info.n_chunks
        if progress:
            progress("indexed", 1.0)
        return info

    # ---- background embedding ------------------------------------------------------
    def embed_in_background(self) -> None:
        """Make sure the background thread embeds whatever chunks have no vector yet."""
        if self.indexer is None or self._stop.is_set():
            return
        with self._changed:
            if self._worker is None:
                self._worker = threading.Thread(target=self._embed_loop, daemon=True,
                                                name=f"embed-{self.root.name}")
                self._worker.start()
        self._wake.set()

    def _embed_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            try:
                while not self._stop.is_set():
                    self._run.wait()
                    if self._held():
                        continue
                    if not _BACKGROUND_GATE.acquire(timeout=0.5):  # another library's batch: look at stop again
                        continue
                    try:
                        if self._stop.is_set() or not self.indexer.embed_pending(max_batches=1):
                            if not self.store.n_pending():
                                break
                    finally:
                        _BACKGROUND_GATE.release()
                    with self._changed:
                        self._changed.notify_all()
            except Exception as e:  # a model server failing: say so to whoever waits, try again when woken
                log.warning("background embedding in %s failed", self.root, exc_info=True)
                self._error = e
            with self._changed:
                self._changed.notify_all()

    def _held(self) -> bool:
        """``settings.search.embed_hold_file`` exists (tests): wait a little and look again."""
        hold = self.settings.search.embed_hold_file
        if hold and Path(hold).exists():
            self._stop.wait(0.2)
            return True
        return False

    def pause_embedding(self) -> None:
        """Hold the background embedding between batches (tests; a caller needing the embedder to itself)."""
        self._run.clear()

    def resume_embedding(self) -> None:
        self._run.set()

    def wait_indexed(self, doc_hash: str | None = None, progress: Progress | None = None,
                     timeout: float | None = None) -> bool:
        """Wait until ``doc_hash`` (or every document) has all its vectors; False on timeout. A failure of the
        background embedding is raised here."""
        if self.indexer is None:
            raise RuntimeError("this library was opened for reading only (no embedder)")
        end = None if timeout is None else time.monotonic() + timeout
        self._error = None
        self.embed_in_background()
        said = None
        with self._changed:
            while True:
                left = self.pending_chunks(doc_hash)
                if left == 0:
                    return True
                if self._stop.is_set():
                    return False
                if self._error is not None:
                    err, self._error = self._error, None
                    raise err
                if progress and doc_hash and left != said:
                    said, n = left, self.store.find(doc_hash)
                    if n:
                        progress("embed", 0.4 + 0.6 * (n.n_chunks - left) / n.n_chunks)
                if end is not None and time.monotonic() >= end:
                    return False
                self._changed.wait(1.0 if end is None else max(0.0, min(1.0, end - time.monotonic())))

    def pending_chunks(self, doc_hash: str | None = None) -> int:
        """Chunks still without a vector (of one listed document, or of all)."""
        if doc_hash is None:
            return self.store.n_pending()
        d = self.store.find(doc_hash)
        return d.n_chunks - d.n_embedded if d else 0

    def lexical_only_documents(self) -> list[str]:
        """Names of the listed documents still embedding (retrieval reaches them by BM25 only, or partly)."""
        return [d.name for d in self.store.documents() if d.state == "searchable"]

    def remove(self, doc_hash: str) -> bool:
        with self.lock:
            n = self.store.unlist(doc_hash)
            self.vectors.remove_document(doc_hash)
            self._sweep()
            self.lexical.invalidate()
            self.lexical.remove_document(doc_hash)
        return n

    # ---- reading (the store's and the indexes' own calls, for the stages and the web app) ----
    def documents(self) -> list[DocInfo]:
        return self.store.documents()

    def find(self, doc_hash: str) -> DocInfo | None:
        return self.store.find(doc_hash)

    def pdf_path(self, doc_hash: str) -> Path:
        return self.store.pdf_path(doc_hash)

    def chunks(self, ids: list[str]) -> list[Chunk]:
        return self.store.chunks(ids)

    def chunks_of(self, doc_hash: str) -> list[Chunk]:
        return self.store.chunks_of(doc_hash)

    def _chunk_texts_of(self, doc_hash: str) -> list[str]:
        """Each chunk's prefix, heading and body (what the lexical index's term statistics count)."""
        return [f"{c.prefix} {c.heading} {c.body}" for c in self.store.chunks_of(doc_hash)]

    def doc_freq(self) -> tuple[dict[str, int], int]:
        """How many chunks hold each content term, and how many chunks there are (``LexicalIndex.doc_freq``)."""
        return self.lexical.doc_freq()

    def doc_terms(self, doc_hash: str) -> frozenset[str]:
        """The content terms a document holds (``LexicalIndex.doc_terms``)."""
        return self.lexical.doc_terms(doc_hash)

    def page(self, doc_hash: str, number: int) -> Page | None:
        return self.store.page(doc_hash, number)

    def n_chunks(self) -> int:
        return self.store.n_chunks()

    def lexical_scores(self, text: str) -> dict[str, float]:
        return self.lexical.scores(text)
