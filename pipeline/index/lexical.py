"""The lexical index: BM25 (``bm25s``) over every chunk's heading and body, built in memory from the store,
and its document-frequency statistics (how many chunks hold each content term).

BM25 is built on first use and again after the library changes (:meth:`LexicalIndex.invalidate`); words are
normalised as ``settings.search.lexical_norm`` says (``pipeline.text.normalize``). The document-frequency statistics
(:meth:`LexicalIndex.doc_freq`, read by the not-in-documents flag) are kept per document: a document's counts
are made once when it is first seen listed and dropped when it is no longer listed, so they always describe the
documents listed now, whatever their number of chunks.
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Callable

import numpy as np

from ..text import content_terms, normalize


class LexicalIndex:
    def __init__(self, texts: Callable[[], list[tuple[str, str, str]]], norm: str,
                 listed: Callable[[], set[str]] | None = None,
                 doc_texts: Callable[[str], list[str]] | None = None):
        """``texts()`` gives (chunk id, heading, body) of every chunk (``DocumentStore.chunk_texts``);
        ``listed()`` the listed documents' hashes and ``doc_texts(doc_hash)`` the text of each of a document's
        chunks (prefix, heading and body): what the document-frequency statistics count."""
        self._texts, self.norm = texts, norm
        self._listed, self._doc_texts = listed, doc_texts
        self._lock = threading.RLock()
        self._bm25 = None
        self._ids: list[str] = []
        self._df_lock = threading.Lock()
        self._per_doc: dict[str, tuple[Counter, int]] = {}  # doc hash -> (chunks holding each term, chunks)
        self._df: Counter = Counter()
        self._n = 0

    def invalidate(self) -> None:
        with self._lock:
            self._bm25 = None

    def _index(self):
        with self._lock:
            if self._bm25 is None:
                import bm25s

                rows = self._texts()
                self._ids = [r[0] for r in rows]
                self._bm25 = bm25s.BM25()
                if rows:
                    self._bm25.index([normalize(f"{h}\n{b}", self.norm) or ["_"] for _, h, b in rows],
                                     show_progress=False)
            return self._bm25, self._ids

    def scores(self, text: str) -> dict[str, float]:
        """BM25 score of every chunk for ``text``."""
        bm25, ids = self._index()
        if not ids:
            return {}
        toks = normalize(text, self.norm)
        scores = bm25.get_scores(toks) if toks else np.zeros(len(ids))
        return dict(zip(ids, scores.tolist()))

    # ---- document-frequency statistics ------------------------------------------------
    def remove_document(self, doc_hash: str) -> None:
        """Take a document's counts out of the statistics."""
        with self._df_lock:
            self._remove(doc_hash)

    def _add(self, doc_hash: str) -> None:
        if doc_hash in self._per_doc:
            return
        texts = self._doc_texts(doc_hash)
        counts: Counter = Counter()
        for t in texts:
            counts.update(content_terms(t))
        self._per_doc[doc_hash] = (counts, len(texts))
        self._df.update(counts)
        self._n += len(texts)

    def _remove(self, doc_hash: str) -> None:
        counts, n = self._per_doc.pop(doc_hash, (None, 0))
        if counts is not None:
            self._df.subtract(counts)
            self._df = +self._df  # drop the terms no chunk holds any more
            self._n -= n

    def doc_freq(self) -> tuple[dict[str, int], int]:
        """(how many chunks hold each content term, how many chunks there are) over the documents listed now.

        Documents listed since the last call are counted and documents no longer listed dropped (by hash, so a
        document removed and another of the same size added are told apart); thread-safe. Returns copies."""
        with self._df_lock:
            self._refresh()
            return dict(self._df), self._n

    def doc_terms(self, doc_hash: str) -> frozenset[str]:
        """The content terms one listed document holds (empty for one not listed); no copy of the statistics."""
        with self._df_lock:
            self._refresh()
            counts = self._per_doc.get(doc_hash)
            return frozenset(counts[0]) if counts else frozenset()

    def _refresh(self) -> None:
        """Count the documents listed since the last call and drop those no longer listed (under ``_df_lock``)."""
        if self._listed is None or self._doc_texts is None:
            raise RuntimeError("this lexical index was built without the documents' texts (listed, doc_texts)")
        listed = set(self._listed())
        for h in set(self._per_doc) - listed:
            self._remove(h)
        for h in sorted(listed - set(self._per_doc)):
            self._add(h)
