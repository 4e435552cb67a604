"""Plain data shared by the stages."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

Box = tuple[float, float, float, float]
LETTERS = "ABCDEF"  # the six options, in order


def chunk_id(doc_hash: str, index: int) -> str:
    """The id of a document's ``index``-th chunk (in SQLite, the vector store and traces)."""
    return f"{doc_hash}:{index}"


@dataclass
class Page:
    number: int  # 1-based
    width: float
    height: float
    markdown: str  # cleaned: running headers/footers removed
    words: list[tuple[float, float, float, float, str]]  # PDF word boxes, reading order
    word_at: list[int]  # for each char of `markdown`, the index of its word in `words`, or -1
    headings: list[tuple[int, int, str]] = field(default_factory=list)  # (char offset, level, text)


@dataclass
class Document:
    doc_hash: str
    name: str
    pages: list[Page]
    warnings: list[str] = field(default_factory=list)
    title: str = ""  # for people (pipeline.documents.titles.title_of): metadata title, first heading or first line

    @property
    def n_pages(self) -> int:
        return len(self.pages)


@dataclass
class Chunk:
    chunk_id: str
    doc_hash: str
    doc_name: str
    index: int
    heading: str
    body: str
    prefix: str
    spans: list[tuple[int, int, int]]  # (page number, start, end) in that page's markdown

    @property
    def pages(self) -> list[int]:
        return [p for p, _, _ in self.spans]

    def embed_text(self) -> str:
        head = f"{self.heading}\n" if self.heading else ""
        pre = f"{self.prefix}\n" if self.prefix else ""
        return f"{pre}{head}{self.body}"


@dataclass(frozen=True)
class Candidate:
    """A chunk as one stage ranked it. Immutable: a stage that scores or reorders candidates returns new ones
    (:meth:`scored`), so what an earlier stage produced is never changed by a later one."""
    chunk: Chunk
    scores: dict[str, float] = field(default_factory=dict)  # dense, lexical, fused, rerank... (read only)
    rank: int = 0

    def scored(self, rank: int | None = None, **scores: float) -> Candidate:
        """This candidate with ``scores`` added (or replaced) and, given, a new ``rank``."""
        return replace(self, scores={**self.scores, **scores}, rank=self.rank if rank is None else rank)

    def ranked(self, rank: int) -> Candidate:
        return replace(self, rank=rank)


@dataclass
class Question:
    qid: str
    text: str
    options: list[str]  # six, A..F
    gold_answer: str | None = None
    gold_doc: str | None = None
    gold_page: int | None = None


@dataclass(frozen=True)
class Search:
    """What search produced for one question: the retrieval stage's candidates (ranked by fusion), the final
    order after reranking and page choice, each stage's seconds, and the documents searched by their words only
    (still embedding when the search began, or met without a vector)."""
    question: Question
    retrieved: tuple[Candidate, ...]
    reranked: tuple[Candidate, ...]
    timings: dict[str, float]  # read only: an answer copies it
    lexical_only: tuple[str, ...]

    @property
    def top(self) -> Candidate | None:
        return self.reranked[0] if self.reranked else None


@dataclass
class Answer:
    letter: str
    probabilities: dict[str, float]
    doc_name: str | None
    doc_hash: str | None
    page: int | None
    candidates: list[Candidate]
    evidence: list[Candidate]
    timings: dict[str, float]
    details: dict = field(default_factory=dict)
