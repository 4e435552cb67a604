"""Stage 4 — question-aware retrieval: dense, BM25, or a weighted fusion of z-scores.

The query is a short instruction + the question + all six options (the
reference system's finding: options name the facts the evidence must hold).
The retriever is given a dense index (``VectorIndex``), a lexical index
(``LexicalIndex``), a way to read chunks, and something that embeds queries
(an ``Embedder``, or the staged run's stored query vectors).

A chunk of a document still embedding (progressive indexing) has no vector:
its dense score is missing, not low. Hybrid fusion takes, for every chunk of
the pool, the weighted mean of the z-scores it has — both for a chunk with a
vector, the lexical one alone (weight renormalised to 1) for one without; the
dense z-scores are taken over the pool's chunks that have a vector. So a
document still embedding is reached by BM25 exactly as it would be in the
``bm25`` mode, and an indexed library is scored as before. In the ``dense``
mode such chunks are not found at all.
"""
from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from ..index.lexical import LexicalIndex
from ..index.vectors import VectorIndex
from ..settings import Settings
from ..types import Candidate, CandidateScores, Chunk, Question


class QueryEmbedder(Protocol):
    def embed_queries(self, texts: list[str]) -> np.ndarray: ...


def query_text(q: Question, settings: Settings, instruction: bool = True) -> str:
    parts = [settings.search.query_instruction + ":"] if instruction and settings.search.query_instruction else []
    parts.append(q.text)
    if settings.search.query_with_options:
        parts += [o for o in q.options if o]
    return "\n".join(parts)


def zscores(values: dict[str, float]) -> dict[str, float]:
    if not values:
        return {}
    v = np.fromiter(values.values(), dtype=np.float64)
    sd = v.std() or 1.0
    return {k: (x - v.mean()) / sd for k, x in values.items()}


class Retriever:
    def __init__(self, dense: VectorIndex, lexical: LexicalIndex, chunks: Callable[[list[str]], list[Chunk]],
                 embedder: QueryEmbedder, settings: Settings):
        self.dense, self.lexical, self.chunks = dense, lexical, chunks
        self.embedder, self.settings = embedder, settings

    @classmethod
    def for_library(cls, library, embedder: QueryEmbedder, settings: Settings) -> "Retriever":
        """Over a ``Library``'s own indexes."""
        return cls(library.vectors, library.lexical, library.chunks, embedder, settings)

    def search(self, q: Question, k: int | None = None) -> list[Candidate]:
        s = self.settings
        k = k or s.search.top_k_retrieve
        text = query_text(q, s)
        dense: dict[str, float] = {}
        lexical: dict[str, float] = {}
        if s.search.retrieval in ("dense", "hybrid"):
            qvec = self.embedder.embed_queries([text])[0]
            dense = self.dense.search(qvec, s.search.pool_k)
        if s.search.retrieval in ("bm25", "hybrid"):
            lexical = self.lexical.scores(query_text(q, s, instruction=False))
        pool: list[str] = []
        if s.search.retrieval == "hybrid":  # BM25's best and dense's best, each scored by both
            pool = hybrid_pool(dense, lexical, s.search.pool_k)
            got = self.dense.get([i for i in pool if i not in dense])  # no vector yet: no dense score
            dense.update({i: float(v @ qvec) for i, v in got.items()})
        fused = fuse(s.search.retrieval, dense, lexical, pool, s.search.dense_weight)
        best = sorted(fused, key=fused.get, reverse=True)[:k]
        out = []
        for rank, chunk in enumerate(self.chunks(best), 1):
            cid = chunk.chunk_id
            d, lex = dense.get(cid), lexical.get(cid)  # none: not embedded yet / no query word
            out.append(Candidate(chunk, CandidateScores(fused=float(fused[cid]), dense=None if d is None else float(d),
                                                        lexical=None if lex is None else float(lex)), rank))
        return out


def hybrid_pool(dense: dict[str, float], lexical: dict[str, float], pool_k: int) -> list[str]:
    """The chunks a hybrid search fuses: the dense search's, then BM25's best ``pool_k`` (each once)."""
    top_lex = sorted(lexical, key=lexical.get, reverse=True)[:pool_k]
    return list(dict.fromkeys(list(dense) + top_lex))


def fuse(mode: str, dense: dict[str, float], lexical: dict[str, float], pool: list[str],
         dense_weight: float) -> dict[str, float]:
    """The fused score of each chunk (a pure function: no index). ``dense`` and ``bm25`` keep their own scores;
    ``hybrid`` z-scores each over ``pool`` and mixes them by ``dense_weight`` (a chunk with no dense score, e.g.
    still embedding, keeps its lexical z-score)."""
    if mode == "dense":
        return dict(dense)
    if mode == "bm25":
        return dict(lexical)
    dz = zscores({i: dense[i] for i in pool if i in dense})
    lz = zscores({i: lexical.get(i, 0.0) for i in pool})
    return {i: dense_weight * dz[i] + (1 - dense_weight) * lz[i] if i in dz else lz[i] for i in pool}
