"""The indexer: one PDF into the library — parse, chunk, store (searchable by BM25), then embed.

The only part of the index that needs an embedder. :meth:`Indexer.add` parses,
chunks and lists a document in one transaction, and returns: the document is
``searchable`` (BM25). :meth:`Indexer.embed_pending` embeds chunks that have no
vector yet, one batch at a time, each batch's vectors written and then marked
in SQLite, so an interruption loses at most the batch being computed and
nothing stored is embedded again (the library runs it in the background).
Refuses a file over the size limit, a library at its document limit, and a
document whose parsing takes longer than ``max_doc_seconds``
(:class:`~pipeline.errors.IngestError`); the same bytes again are recognised
(``DocInfo.duplicate``) and not indexed twice.
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Callable

import numpy as np

from ..backends.base import Embedder
from ..documents.chunking import TokenCounter, chunk_document
from ..errors import IngestError
from ..documents.ingest import Deadline, check_size, file_hash, parse_pdf, safe_name
from ..settings import Settings
from .lexical import LexicalIndex
from .store import DocInfo, DocumentStore
from .vectors import VectorIndex

Progress = Callable[[str, float], None]


class Indexer:
    """Writes into the parts of one library it is given; ``lock`` guards them (the library's), ``on_added`` is
    called once a document is searchable (the library starts its background embedding there)."""

    def __init__(self, store: DocumentStore, vectors: VectorIndex, lexical: LexicalIndex, embedder: Embedder,
                 settings: Settings, lock, on_added: Callable[[], None] = lambda: None):
        self.store, self.vectors, self.lexical, self.lock = store, vectors, lexical, lock
        self.embedder, self.settings, self.on_added = embedder, settings, on_added
        self.count = TokenCounter(embedder.count_word_tokens)
        self._embedding = threading.Lock()  # one embed_pending at a time: no batch is taken twice

    def _check_room(self, name: str) -> None:
        n = self.store.n_documents()
        if n >= self.settings.limits.max_documents:
            raise IngestError(f"{name}: the library already holds {n} documents, the limit (PDFQA_MAX_DOCUMENTS); "
                              "remove one to add another")

    def add(self, data: bytes, name: str, progress: Progress | None = None) -> DocInfo:
        """Parse, chunk and list one PDF (searchable by BM25 on return; its vectors come from
        :meth:`embed_pending`); raises :class:`IngestError` for a bad file or a limit reached."""
        t0 = time.perf_counter()
        s = self.settings
        name = safe_name(name)
        deadline = Deadline(name, s.limits.max_doc_seconds)
        say = progress or (lambda stage, frac: None)
        check_size(name, len(data), s.limits.max_upload_mb)
        h = file_hash(data)
        known = self.store.find(h)
        if known:
            known.duplicate = True
            return known
        self._check_room(name)
        say("parse", 0.0)
        c = s.chunking
        doc = parse_pdf(data, name, max_pages=s.limits.max_pages, repeated_line_share=c.repeated_line_share,
                        edge_lines=c.running_edge_lines,
                        ocr=c.ocr, ocr_languages=c.ocr_languages, ocr_dpi=c.ocr_dpi, deadline=deadline,
                        max_page_content_mb=s.limits.max_page_content_mb)
        say("chunk", 0.3)
        chunks = chunk_document(doc, self.count, chunk_tokens=c.chunk_tokens, overlap=c.chunk_overlap,
                                prefix_tokens=c.prefix_tokens, use_prefix=c.use_prefix, long_pages=c.long_doc_pages,
                                long_chunk_tokens=c.long_chunk_tokens, long_prefix_tokens=c.long_prefix_tokens)
        if not chunks:
            raise IngestError(f"{name}: no text to index")
        deadline.check()
        say("store", 0.35)
        with self.lock:
            self._check_room(name)  # another thread may have filled the library meanwhile
            self.store.save_pdf(h, data)
            self.store.save(doc, chunks)
            self.lexical.invalidate()
        say("searchable", 0.4)
        self.on_added()
        return DocInfo(h, doc.name, doc.n_pages, len(chunks), doc.warnings, seconds=time.perf_counter() - t0,
                       n_embedded=0, title=doc.title or doc.name)

    def embed_pending(self, max_batches: int | None = None) -> int:
        """Embed chunks of listed documents that have no vector, ``embed_batch`` at a time (at most
        ``max_batches``); returns how many were stored."""
        done, batches = 0, 0
        with self._embedding:
            while max_batches is None or batches < max_batches:
                with self.lock:
                    todo = self.store.pending(self.settings.search.embed_batch)
                if not todo:
                    break
                vecs = self.embedder.embed_passages([c.embed_text() for c in todo])
                with self.lock:  # the document may have been removed meanwhile: store only what is still listed
                    keep = set(self.store.listed_chunks([c.chunk_id for c in todo]))
                    by_doc = defaultdict(list)
                    for c, v in zip(todo, vecs):
                        if c.chunk_id in keep:
                            by_doc[c.doc_hash].append((c, v))
                    for h, rows in by_doc.items():
                        self.vectors.add([c.chunk_id for c, _ in rows], np.stack([v for _, v in rows]), h,
                                        [c.index for c, _ in rows])
                    self.store.mark_embedded([c.chunk_id for c in todo if c.chunk_id in keep])
                done += len(keep)
                batches += 1
        return done
