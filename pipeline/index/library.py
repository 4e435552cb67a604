"""Stage 3 — the library: one folder's index, put together from its parts.

* :class:`~pipeline.index.store.DocumentStore` — documents, pages with word boxes and chunk text (SQLite), the PDFs;
* :class:`~pipeline.index.vectors.VectorIndex` — the chunk vectors (embedded Chroma, or a Chroma server);
* :class:`~pipeline.index.lexical.LexicalIndex` — BM25 over the chunk text, rebuilt in memory;
* :class:`~pipeline.index.indexer.Indexer` — adds a PDF (the only part that needs an embedder).

A document is listed only once all of it is stored: its vectors go into the
vector index first, then its rows in one SQLite transaction; vectors, rows and
files of a document that never got listed (a crash in between) are swept away
on open. Reopening costs no re-embedding. Reading needs no embedder:
``Library(root, None, settings)``.
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from ..backends.base import Embedder
from ..settings import Settings
from ..types import Chunk, Page
from .indexer import Indexer, Progress
from .lexical import LexicalIndex
from .store import DocInfo, DocumentStore
from .vectors import VectorIndex


class Library:
    def __init__(self, root: Path | str, embedder: Embedder | None, settings: Settings):
        self.root = Path(root)
        self.settings = settings
        self.lock = threading.RLock()
        self.store = DocumentStore(self.root, settings.fingerprint())
        self.vectors = VectorIndex(self.root, settings, self.store.library_id, self.store.n_listed_chunks())
        self.lexical = LexicalIndex(self.store.chunk_texts, settings.lexical_norm)
        self.indexer = Indexer(self, embedder) if embedder is not None else None
        self._sweep()

    def _sweep(self) -> None:
        """Remove vectors, rows and files of documents that were never fully listed."""
        self.vectors.sweep(self.store.listed())
        self.store.sweep()

    def close(self) -> None:
        """Release the SQLite connection and this library's embedded Chroma system (best effort)."""
        self.store.close()
        self.vectors.close()

    def add(self, data: bytes, name: str, progress: Progress | None = None) -> DocInfo:
        """Index one PDF (see :class:`Indexer`); a library opened without an embedder cannot."""
        if self.indexer is None:
            raise RuntimeError("this library was opened for reading only (no embedder)")
        return self.indexer.add(data, name, progress)

    def remove(self, doc_hash: str) -> bool:
        with self.lock:
            n = self.store.unlist(doc_hash)
            self.vectors.remove_document(doc_hash)
            self._sweep()
            self.lexical.invalidate()
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

    def page(self, doc_hash: str, number: int) -> Page | None:
        return self.store.page(doc_hash, number)

    def n_chunks(self) -> int:
        return self.store.n_chunks()

    def embeddings(self, ids: list[str]) -> np.ndarray:
        return self.vectors.embeddings(ids)

    def dense_search(self, qvec: np.ndarray, k: int) -> dict[str, float]:
        return self.vectors.search(qvec, k)

    def lexical_scores(self, text: str) -> dict[str, float]:
        return self.lexical.scores(text)
