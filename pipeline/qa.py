"""The pipeline: retrieval → option-aware reranking → constrained answering → localisation.

Models are loaded once and shared (``pipeline.backends.registry.Models``); a
``Pipeline`` is one library (one data directory) over them, so many libraries
(one per web session) share one embedder, one reranker and one answerer.
"""
from __future__ import annotations

import time
from pathlib import Path

from .answering import answer as answering
from .backends.registry import Models
from .errors import EmptyLibrary
from .index import DocInfo, Library, Progress
from .answering.flag import not_in_documents
from .search.pages import rescore_pages
from .search.rerank import make_reranker, rerank
from .search.retrieval import Retriever
from .settings import Settings
from .types import Answer, Candidate, Question


class Pipeline:
    def __init__(self, settings: Settings, root: Path | str | None = None, models: Models | None = None,
                 background: bool = False):
        """``background``: ``add_pdf`` returns once the document is searchable, its vectors follow (the web app)."""
        self.settings = settings
        self.models = models or Models(settings)
        self.library = Library(Path(root) if root else settings.data_dir / "library", self.models.embedder, settings,
                               background=background)
        self.retriever = Retriever.for_library(self.library, self.models.embedder, settings)
        self.reranker = make_reranker(settings, self.library, self.models.embedder, self.models.reranker)

    def add_pdf(self, data: bytes, name: str, progress: Progress | None = None) -> DocInfo:
        return self.library.add(data, name, progress)

    def retrieve(self, q: Question) -> tuple[list[Candidate], list[Candidate], dict[str, float]]:
        """Candidates after retrieval (ranked by fusion) and after reranking, with timings."""
        t0 = time.perf_counter()
        cands = self.retriever.search(q)
        retrieved = [Candidate(c.chunk, dict(c.scores), c.rank) for c in cands]
        t1 = time.perf_counter()
        reranked = rescore_pages(q, rerank(self.reranker, q, cands), self.library, self.settings, self.models.embedder)
        t2 = time.perf_counter()
        return retrieved, reranked, {"retrieve": t1 - t0, "rerank": t2 - t1}

    def evidence(self, reranked: list[Candidate], k: int) -> list[Candidate]:
        """The passages the answer model reads: from different pages when the top one's document is long
        (``distinct_pages``, documents of ``page_min_pages`` pages or more, as page choice)."""
        s = self.settings
        info = self.library.find(reranked[0].chunk.doc_hash) if s.distinct_pages and reranked else None
        distinct = info is not None and info.n_pages >= s.page_min_pages
        return answering.select_evidence(reranked, k, s.neighbours, self.library.chunks, distinct)

    def ask(self, q: Question) -> Answer:
        if self.library.n_chunks() == 0:
            raise EmptyLibrary("the library is empty: add PDFs first")
        still = self.library.lexical_only_documents()  # before retrieval: what it could not score densely
        return self.answer(q, *self.retrieve(q), lexical_only=still)

    def lexical_only(self, candidates: list[Candidate], before: list[str] | None = None) -> list[str]:
        """The documents searched lexically only (or partly): those still embedding now or ``before`` the search,
        and those of candidates that got no dense score (no vector when they were searched)."""
        names = set(before or []) | set(self.library.lexical_only_documents())
        if self.settings.retrieval != "bm25":
            names |= {c.chunk.doc_name for c in candidates if "dense" not in c.scores}
        return sorted(names)

    def answer(self, q: Question, retrieved: list[Candidate], reranked: list[Candidate],
               timings: dict[str, float], lexical_only: list[str] | None = None) -> Answer:
        """The answer from ``retrieve``'s candidates (a model server's failure: ``errors.BackendError``).

        ``details["lexical_only_docs"]``: the documents searched lexically only (``lexical_only``; ``lexical_only``
        given: those still embedding before the search); the not-in-documents flag decides on the lexical
        features alone when there are any (``details["flag_basis"]``)."""
        if not reranked:
            raise EmptyLibrary("nothing was retrieved for this question: is the library empty?")
        still = self.lexical_only(retrieved, lexical_only)
        a = answering.answer(q, retrieved, reranked, timings, self.models.answerer, self.settings, self.evidence)
        a.details["lexical_only_docs"] = still
        a.details.update(self.flag(q, reranked, a.evidence, still))
        return a

    def flag(self, q: Question, reranked: list[Candidate], evidence: list[Candidate], lexical_only: list[str],
             model: dict | None = None) -> dict:
        """"The answer may not be in your documents" (``answering.flag.not_in_documents``) on what was scored."""
        return not_in_documents(self.library, q, reranked, evidence, model, self.settings.embedder, lexical_only)

    def order_check(self, q: Question, evidence: list[Candidate], n: int = 6) -> dict:
        """The answer re-scored with the options in ``n`` orders over the same evidence (``answer.order_check``)."""
        return answering.order_check(self.models.answerer, q, evidence, self.settings, n)

    def ask_free(self, text: str, qid: str = "ask"):
        """A short answer to a question without options, or an abstention (``pipeline.answering.freeform.FreeAnswer``)."""
        from .answering.freeform import answer_free

        return answer_free(self, Question(qid, text, []))
