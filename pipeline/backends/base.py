"""The three model roles as interfaces, and what they return.

The stages (``pipeline.index``, ``pipeline.retrieval``, ``pipeline.rerank``,
``pipeline.answer``) see models only through these classes; the backends
(``e5``, ``llama_cpp``, ``vllm_engine``, ``remote``) implement them. Each role
has a batch method with a default (one call per item), which a backend that
can batch (vLLM) overrides.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from ..types import Candidate, Question


def l2_normalise(v) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero)."""
    v = np.asarray(v, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


class Embedder(ABC):
    """Passages and queries to L2-normalised vectors; counts tokens the way it reads them."""

    @abstractmethod
    def embed_passages(self, texts: list[str]) -> np.ndarray:
        """One vector per passage (a batch: the texts go in together)."""

    @abstractmethod
    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """One vector per query (a batch)."""

    @abstractmethod
    def count_word_tokens(self, word: str) -> int:
        """Tokens one whitespace-free word costs inside a passage (chunk sizes are in these tokens)."""


class Reranker(ABC):
    """A relevance score for each (question, candidate) pair; higher is more relevant."""

    @abstractmethod
    def score(self, q: Question, candidates: list[Candidate]) -> list[float]: ...

    def score_batch(self, items: list[tuple[Question, list[Candidate]]]) -> list[list[float]]:
        """Every question's candidates; by default one :meth:`score` call per question."""
        return [self.score(q, cands) if cands else [] for q, cands in items]


@dataclass
class Scores:
    """An answerer's result: the six options' probabilities, and what they came from."""

    probabilities: dict[str, float]
    letter: dict[str, float] = field(default_factory=dict)
    option: dict[str, float] = field(default_factory=dict)
    prompt_tokens: int = 0
    seconds: float = 0.0
    features: dict = field(default_factory=dict)  # the calibrated scorer's raw per-option features


class Answerer(ABC):
    """Probabilities of the six options given the evidence; never free text."""

    @abstractmethod
    def score(self, q: Question, evidence: list[Candidate], scorer: str | None = None) -> Scores:
        """Probabilities of the six options; ``scorer`` overrides the profile's."""

    def score_batch(self, items: list[tuple[Question, list[Candidate]]]) -> list[Scores]:
        """Every question's evidence; by default one :meth:`score` call per question."""
        return [self.score(q, ev) for q, ev in items]
