"""Plain data shared by the stages."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace

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


@dataclass(frozen=True, eq=False)
class CandidateScores(Mapping[str, float]):
    """What the stages measured of one candidate, each ``None`` until the stage that measures it ran.

    Immutable and typed (a name no stage writes is an error); read as a mapping of the measured ones
    (``"dense" in s``, ``s.get("rerank")``, ``dict(s)`` for a trace), compared with a dict by content."""
    dense: float | None = None  # retrieval: the query's and the chunk's embeddings' similarity (none: not embedded yet)
    lexical: float | None = None  # retrieval: BM25 of the query's words
    fused: float | None = None  # retrieval: dense and lexical fused (search.retrieval, search.dense_weight)
    option_dense: float | None = None  # rerank: the best option's embedding similarity
    option_lexical: float | None = None  # rerank: the best option's BM25
    rerank: float | None = None  # rerank: the reranker's score (the order it leaves)
    page_joint: float | None = None  # page choice: the question's and options' words together on the chunk
    page: float | None = None  # page choice: rerank and page_joint combined (the order it leaves)
    page_expanded: float | None = None  # 1.0: added by page choice from the top document (not retrieved)
    neighbour_of: float | None = None  # answering: the next chunk of the passage of this rank
    preceding_of: float | None = None  # free-form: the chunk before the passage of this rank

    def __getitem__(self, name: str) -> float:
        value = getattr(self, name, None) if name in _SCORE_NAMES else None
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return (n for n in _SCORE_NAMES if getattr(self, n) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"CandidateScores({dict(self)})"


_SCORE_NAMES = tuple(f.name for f in fields(CandidateScores))


@dataclass(frozen=True)
class Candidate:
    """A chunk as one stage ranked it. Immutable: a stage that scores or reorders candidates returns new ones
    (:meth:`scored`), so what an earlier stage produced is never changed by a later one."""
    chunk: Chunk
    scores: CandidateScores = field(default_factory=CandidateScores)  # a mapping is taken as its names' values
    rank: int = 0

    def __post_init__(self):
        if not isinstance(self.scores, CandidateScores):
            object.__setattr__(self, "scores", CandidateScores(**dict(self.scores)))

    def scored(self, rank: int | None = None, **scores: float) -> Candidate:
        """This candidate with ``scores`` added (or replaced) and, given, a new ``rank``."""
        return replace(self, scores=replace(self.scores, **scores), rank=self.rank if rank is None else rank)

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

    def without_options(self) -> Question:
        """The same question asked free-form (no options; its gold labels kept)."""
        return replace(self, options=[])


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
