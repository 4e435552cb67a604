"""The pipeline: retrieval → option-aware reranking → constrained answering → localisation.

Models are loaded once and shared (``pipeline.backends.registry.Models``); a
``Pipeline`` is one library (one data directory) over them, so many libraries
(one per web session) share one embedder, one reranker and one answerer.
"""
from __future__ import annotations

import time
from functools import cached_property
from pathlib import Path
from typing import Callable, Protocol

from .answering import answer as answering
from .answering.flag import not_in_documents
from .answering.freeform import FreeAnswer, Switches, answer_free, free_reader
from .backends.registry import Models
from .errors import EmptyLibrary
from .index import DocInfo, Library, Progress
from .search.pages import rescore_pages
from .search.rerank import make_reranker, rerank
from .search.retrieval import Retriever
from .settings import Settings
from .types import Answer, Candidate, Question, Search

# ``on_stage(name, result)``: called as each stage of :meth:`Pipeline.ask` ends, with that stage's result —
# ``("search", Search)`` (retrieval, reranking, page choice), then ``("answer", Answer | FreeAnswer)``; for a
# question without options, between them: ``("draft", text so far)`` as the model writes its short answer, and
# ``("retry", {"k", "first", "more"})`` before a wider retry (``answering.freeform.answer_free``; ``more``: the
# passages it adds to the first ones, absent where it reads all ``k`` afresh).
OnStage = Callable[[str, object], None]


class Asker(Protocol):
    """What runs a question: a :class:`Pipeline`, or a small wrapper of one (a replay of stored search results,
    a run that can be stopped). Batch runs, the web app and the benchmarks take an ``Asker``."""

    settings: Settings
    library: Library

    def search(self, q: Question) -> Search: ...

    def ask(self, q: Question, on_stage: OnStage | None = None, *, found: Search | None = None, orders: int = 0,
            read=None, flag_model: dict | None = None) -> Answer | FreeAnswer: ...


class Pipeline:
    def __init__(self, settings: Settings, root: Path | str | None = None, models: Models | None = None,
                 background: bool = False, library: Library | None = None):
        """``background``: ``add_pdf`` returns once the document is searchable, its vectors follow (the web app).
        ``library``: one already open (e.g. read-only, without an embedder: a replay of stored search results)."""
        self.settings = settings
        self.models = models or Models(settings)
        self.library = library or Library(Path(root) if root else settings.data_dir / "library",
                                          self.models.embedder, settings, background=background)

    @cached_property
    def retriever(self) -> Retriever:
        return Retriever.for_library(self.library, self.models.embedder, self.settings)

    @cached_property
    def reranker(self):
        return make_reranker(self.settings, self.library, self.models.embedder, self.models.reranker)

    def add_pdf(self, data: bytes, name: str, progress: Progress | None = None) -> DocInfo:
        return self.library.add(data, name, progress)

    # ---- one question -------------------------------------------------------------------------------------
    def ask(self, q: Question, on_stage: OnStage | None = None, *, found: Search | None = None, orders: int = 0,
            read=None, flag_model: dict | None = None) -> Answer | FreeAnswer:
        """Run one question: search, then the answer — a six-option :class:`Answer`, or for a question without
        options a :class:`~pipeline.answering.freeform.FreeAnswer` (a short answer, or "not found").

        ``on_stage``: told as each stage ends (:data:`OnStage`). ``found``: search results to answer from instead
        of searching (a replay). ``orders`` > 1: the six-option answer re-scored with the options in that many
        orders (``details["order_check"]``). ``read`` and ``flag_model`` replace the free-form model call and the
        flag's weights (the benchmarks'). A model server's failure raises ``errors.BackendError``."""
        found = found or self.search(q)
        if on_stage:
            on_stage("search", found)
        if not found.reranked:
            raise EmptyLibrary("nothing was retrieved for this question: is the library empty?")
        a = self._answer_free(q, found, read, flag_model, on_stage) if not any(o.strip() for o in q.options) \
            else self._answer_options(q, found, orders)
        if on_stage:
            on_stage("answer", a)
        return a

    def search(self, q: Question) -> Search:
        """Retrieval, reranking and (in a long document) page choice; the documents still embedding are noted
        before the search begins (what it could not score densely), so the flag judges what was scored."""
        if self.library.n_chunks() == 0:
            raise EmptyLibrary("the library is empty: add PDFs first")
        before = self.library.lexical_only_documents()
        t0 = time.perf_counter()
        retrieved = self.retriever.search(q)
        t1 = time.perf_counter()
        reranked = rescore_pages(q, rerank(self.reranker, q, retrieved), self.library, self.settings,
                                 self.models.embedder)
        t2 = time.perf_counter()
        return Search(q, tuple(retrieved), tuple(reranked), {"retrieve": t1 - t0, "rerank": t2 - t1},
                      tuple(self.lexical_only(retrieved, before)))

    def order_check(self, q: Question, evidence: list[Candidate], n: int = 6) -> dict:
        """The answer re-scored with the options in ``n`` orders over the same evidence (``answer.order_check``)."""
        return answering.order_check(self.models.answerer, q, evidence, self.settings, n)

    # ---- its parts ----------------------------------------------------------------------------------------
    def _answer_options(self, q: Question, found: Search, orders: int) -> Answer:
        s, reranked = self.settings, list(found.reranked)
        chosen = self.evidence(reranked, s.answer.top_k_answer)
        wider = self.evidence(reranked, s.answer.retry_top_k) if s.answer.retry_below and len(reranked) > s.answer.top_k_answer \
            else None
        a = answering.answer_options(q, found, chosen, wider, self.models.answerer, s)
        a.details["lexical_only_docs"] = list(found.lexical_only)
        a.details.update(self._flag(q, reranked, chosen, list(found.lexical_only)))  # as fitted: top_k_answer
        if orders > 1:
            a.details["order_check"] = self.order_check(q, a.evidence, orders)
        return a

    def _answer_free(self, q: Question, found: Search, read, flag_model: dict | None, on_stage=None) -> FreeAnswer:
        s, reranked = self.settings, list(found.reranked)
        flag = self._flag(q, reranked, self.evidence(reranked, s.answer.top_k_answer), list(found.lexical_only),
                          flag_model) if Switches.from_settings(s).flag else {}
        return answer_free(q, found, flag, free_reader(self.models.answerer, s), self.library, s, read, on_stage)

    def evidence(self, reranked: list[Candidate], k: int) -> list[Candidate]:
        """The passages the answer model reads: from different pages when the top one's document is long
        (``distinct_pages``, documents of ``page_min_pages`` pages or more, as page choice)."""
        s = self.settings
        info = self.library.find(reranked[0].chunk.doc_hash) if s.answer.distinct_pages and reranked else None
        distinct = info is not None and info.n_pages >= s.pages.page_min_pages
        return answering.select_evidence(reranked, k, s.answer.neighbours, self.library.chunks, distinct)

    def lexical_only(self, candidates: list[Candidate], before: list[str]) -> list[str]:
        """The documents searched lexically only (or partly): those still embedding now or ``before`` the search,
        and those of candidates that got no dense score (no vector when they were searched)."""
        names = set(before) | set(self.library.lexical_only_documents())
        if self.settings.search.retrieval != "bm25":
            names |= {c.chunk.doc_name for c in candidates if c.scores.dense is None}
        return sorted(names)

    def _flag(self, q: Question, reranked: list[Candidate], evidence: list[Candidate], lexical_only: list[str],
              model: dict | None = None) -> dict:
        """"The answer may not be in your documents" (``answering.flag.not_in_documents``) on what was scored."""
        return not_in_documents(self.library, q, reranked, evidence, model, self.settings.search.embedder, lexical_only)
