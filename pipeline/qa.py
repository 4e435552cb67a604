"""The pipeline: retrieval → option-aware reranking → constrained answering → localisation.

Models are loaded once and shared (``Models``); a ``Pipeline`` is one library
(one data directory) over them, so many libraries (one per web session) share
one embedder and one answerer.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from .answer import LETTERS, Answerer, make_answerer
from .embedders import Embedder, make_embedder
from .index import DocInfo, Library, Progress
from .rerank import make_reranker
from .retrieval import Retriever
from .settings import Settings
from .text import normalize
from .types import Answer, Candidate, Question


class Models:
    """The embedder and the answerer, loaded on first use and shared by every pipeline."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None, answerer: Answerer | None = None):
        self.settings = settings
        self._embedder, self._answerer = embedder, answerer
        self._lock = threading.Lock()

    @property
    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = make_embedder(self.settings)
            return self._embedder

    @property
    def answerer(self) -> Answerer:
        with self._lock:
            if self._answerer is None:
                self._answerer = make_answerer(self.settings)
            return self._answerer


def evidence_page(c: Candidate, q: Question, letter: str | None) -> int:
    """The page of a chunk that holds the evidence: where the question's and answer's words are."""
    if len(c.chunk.spans) == 1:
        return c.chunk.spans[0][0]
    want = set(normalize(q.text + " " + (q.options[LETTERS.index(letter)] if letter else "")))
    body, pos, best, best_n = c.chunk.body, 0, c.chunk.spans[0][0], -1
    for page, s, e in c.chunk.spans:
        part = body[pos: pos + (e - s)]
        pos += (e - s) + 1
        n = len(want & set(normalize(part)))
        if n > best_n:
            best, best_n = page, n
    return best


class Pipeline:
    def __init__(self, settings: Settings, root: Path | str | None = None, models: Models | None = None):
        self.settings = settings
        self.models = models or Models(settings)
        self.library = Library(Path(root) if root else settings.data_dir / "library", self.models.embedder, settings)
        self.retriever = Retriever(self.library, self.models.embedder, settings)
        self.reranker = make_reranker(settings, self.library, self.models.embedder)

    def add_pdf(self, data: bytes, name: str, progress: Progress | None = None) -> DocInfo:
        return self.library.add(data, name, progress)

    def retrieve(self, q: Question) -> tuple[list[Candidate], list[Candidate], dict[str, float]]:
        """Candidates after retrieval (ranked by fusion) and after reranking, with timings."""
        t0 = time.perf_counter()
        cands = self.retriever.search(q)
        retrieved = [Candidate(c.chunk, dict(c.scores), c.rank) for c in cands]
        t1 = time.perf_counter()
        reranked = self.reranker.rerank(q, cands)
        t2 = time.perf_counter()
        return retrieved, reranked, {"retrieve": t1 - t0, "rerank": t2 - t1}

    def evidence(self, reranked: list[Candidate], k: int) -> list[Candidate]:
        top = reranked[:k]
        if not self.settings.neighbours:
            return top
        out: list[Candidate] = []
        for c in top:  # each top chunk followed by its next chunk in the document
            out.append(c)
            nxt = self.library.chunks([f"{c.chunk.doc_hash}:{c.chunk.index + 1}"])
            if nxt and all(x.chunk.chunk_id != nxt[0].chunk_id for x in reranked[:k]):
                out.append(Candidate(nxt[0], {"neighbour_of": c.rank}, c.rank))
        return out

    def ask(self, q: Question) -> Answer:
        if self.library.n_chunks() == 0:
            raise ValueError("the library is empty: add PDFs first")
        return self.answer(q, *self.retrieve(q))

    def answer(self, q: Question, retrieved: list[Candidate], reranked: list[Candidate],
               timings: dict[str, float]) -> Answer:
        """The answer from ``retrieve``'s candidates (a model server's failure: ``remote.BackendError``)."""
        if not reranked:
            raise ValueError("nothing was retrieved for this question: is the library empty?")
        s = self.settings
        evidence = self.evidence(reranked, s.top_k_answer)
        scores = self.models.answerer.score(q, evidence, scorer=s.scorer)  # this pipeline's scorer, not the models'
        timings["answer"] = scores.seconds
        details = {"letter": scores.letter, "option": scores.option, "prompt_tokens": scores.prompt_tokens,
                   "retrieved": retrieved, "retried": False}
        probs = scores.probabilities
        if s.retry_below and max(probs.values()) < s.retry_below and len(reranked) > s.top_k_answer:
            wider = self.evidence(reranked, s.retry_top_k)
            again = self.models.answerer.score(q, wider, scorer=s.scorer)
            timings["answer_retry"] = again.seconds
            details["retried"] = True
            if max(again.probabilities.values()) > max(probs.values()):
                probs, evidence = again.probabilities, wider
        letter = max(probs, key=probs.get)
        top = reranked[0]
        return Answer(letter, probs, top.chunk.doc_name, top.chunk.doc_hash, evidence_page(top, q, letter),
                      reranked, evidence, timings, details)

    def ask_free(self, text: str, qid: str = "ask"):
        """A short answer to a question without options, or an abstention (``pipeline.freeform.FreeAnswer``)."""
        from .freeform import answer_free

        return answer_free(self, Question(qid, text, []))
