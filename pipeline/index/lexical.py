"""The lexical index: BM25 (``bm25s``) over every chunk's heading and body, built in memory from the store.

Built on first use and again after the library changes (:meth:`LexicalIndex.invalidate`); words are
normalised as ``settings.lexical_norm`` says (``pipeline.text.normalize``).
"""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from ..text import normalize


class LexicalIndex:
    def __init__(self, texts: Callable[[], list[tuple[str, str, str]]], norm: str):
        """``texts()`` gives (chunk id, heading, body) of every chunk (``DocumentStore.chunk_texts``)."""
        self._texts, self.norm = texts, norm
        self._lock = threading.RLock()
        self._bm25 = None
        self._ids: list[str] = []

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
