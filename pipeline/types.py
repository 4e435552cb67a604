"""Plain data shared by the stages."""
from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass
class Candidate:
    chunk: Chunk
    scores: dict[str, float] = field(default_factory=dict)  # dense, lexical, fused, rerank...
    rank: int = 0


@dataclass
class Question:
    qid: str
    text: str
    options: list[str]  # six, A..F
    gold_answer: str | None = None
    gold_doc: str | None = None
    gold_page: int | None = None


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
