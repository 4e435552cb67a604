"""The indexer: one PDF into the library — parse, chunk, embed, then store (vectors first, then rows).

The only part of the index that needs an embedder. Refuses a file over the
size limit, a library at its document limit, and a document that takes longer
than ``max_doc_seconds`` (:class:`~pipeline.errors.IngestError`); the same
bytes again are recognised (``DocInfo.duplicate``) and not indexed twice.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..backends.base import Embedder
from ..chunking import TokenCounter, chunk_document
from ..errors import IngestError
from ..ingest import Deadline, check_size, file_hash, parse_pdf, safe_name
from .store import DocInfo

if TYPE_CHECKING:
    from .library import Library

Progress = Callable[[str, float], None]


class Indexer:
    def __init__(self, library: Library, embedder: Embedder):
        self.library, self.embedder, self.settings = library, embedder, library.settings
        self.count = TokenCounter(embedder.count_word_tokens)

    def _check_room(self, name: str) -> None:
        n = self.library.store.n_documents()
        if n >= self.settings.max_documents:
            raise IngestError(f"{name}: the library already holds {n} documents, the limit (PDFQA_MAX_DOCUMENTS); "
                              "remove one to add another")

    def add(self, data: bytes, name: str, progress: Progress | None = None) -> DocInfo:
        """Parse, chunk, embed and store one PDF; raises :class:`IngestError` for a bad file or a limit reached."""
        t0 = time.perf_counter()
        s, lib = self.settings, self.library
        name = safe_name(name)
        deadline = Deadline(name, s.max_doc_seconds)
        say = progress or (lambda stage, frac: None)
        check_size(name, len(data), s.max_upload_mb)
        h = file_hash(data)
        known = lib.find(h)
        if known:
            known.duplicate = True
            return known
        self._check_room(name)
        say("parse", 0.0)
        doc = parse_pdf(data, name, max_pages=s.max_pages, repeated_line_share=s.repeated_line_share,
                        ocr=s.ocr, ocr_languages=s.ocr_languages, ocr_dpi=s.ocr_dpi, deadline=deadline)
        say("chunk", 0.3)
        chunks = chunk_document(doc, self.count, chunk_tokens=s.chunk_tokens, overlap=s.chunk_overlap,
                                prefix_tokens=s.prefix_tokens, use_prefix=s.use_prefix)
        if not chunks:
            raise IngestError(f"{name}: no text to index")
        vectors = []
        for i in range(0, len(chunks), s.embed_batch):
            deadline.check()
            say("embed", 0.35 + 0.6 * i / len(chunks))
            vectors.append(self.embedder.embed_passages([c.embed_text() for c in chunks[i:i + s.embed_batch]]))
        emb = np.concatenate(vectors)
        say("store", 0.97)
        with lib.lock:
            self._check_room(name)  # another thread may have filled the library meanwhile
            lib.store.save_pdf(h, data)
            lib.vectors.add([c.chunk_id for c in chunks], emb, h, [c.index for c in chunks])
            lib.store.save(doc, chunks)
            lib.lexical.invalidate()
        say("indexed", 1.0)
        return DocInfo(h, doc.name, doc.n_pages, len(chunks), doc.warnings, seconds=time.perf_counter() - t0,
                       title=doc.title or doc.name)
