"""Stage 2 — contextual chunking.

Each chunk = the document prefix (its first ``prefix_tokens`` tokens) + the
heading path where the chunk starts + a body of at most ``chunk_tokens``
tokens, consecutive chunks overlapping by about ``chunk_overlap`` tokens. A new
section starts a new chunk once the current one is a third full. Tokens are the
embedder's own. Every chunk keeps its character span on each page it covers.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from ..types import Chunk, Document, chunk_id

_SPACE = re.compile(r"\S+")
_MD_NOISE = re.compile(r"[*_`#|>]+|<sup>|</sup>")
# a numbered clause or article at the start of a line: "12.", "12.3.", "12.3.1", "Стаття 5", "Article 5", "§ 5"
_CLAUSE = re.compile(r"^\s*(?:\*\*)?\s*(?:\d{1,3}(?:\.\d{1,3}){0,3}\.\s+\S|\d{1,3}(?:\.\d{1,3}){1,3}\s+\S"
                     r"|(?:Стаття|Article|§)\s*\d)", re.IGNORECASE)


class TokenCounter:
    """Counts tokens of a text as the sum over its whitespace-separated words.

    Exact for SentencePiece/WordPiece-style tokenizers that split on spaces
    first; each distinct word is asked of the tokenizer once.
    """

    def __init__(self, count_word: Callable[[str], int]):
        self._count_word = count_word
        self._cache: dict[str, int] = {}

    def word(self, w: str) -> int:
        n = self._cache.get(w)
        if n is None:
            n = self._cache[w] = max(1, self._count_word(w))
        return n

    def __call__(self, text: str) -> int:
        return sum(self.word(w) for w in text.split())

    def head(self, text: str, budget: int) -> str:
        """The longest run of whole words from the start within ``budget`` tokens."""
        used, end = 0, 0
        for m in _SPACE.finditer(text):
            used += self.word(m.group())
            if used > budget:
                break
            end = m.end()
        return text[:end]


@dataclass
class _Piece:
    page: int
    start: int
    end: int
    tokens: int
    heading: str
    section_start: bool


def plain(text: str) -> str:
    return re.sub(r"\s+", " ", _MD_NOISE.sub(" ", text)).strip()


def document_prefix(doc: Document, count: TokenCounter, budget: int) -> str:
    text = plain(" ".join(p.markdown for p in doc.pages[:3]))
    return count.head(text, budget)


def _pieces(doc: Document, count: TokenCounter, max_piece: int, heading_budget: int,
            clauses: bool = False) -> list[_Piece]:
    """Lines of every page, cut to at most ``max_piece`` tokens, each with its heading path (``clauses``: a
    numbered clause's first line starts a section too)."""
    out: list[_Piece] = []
    stack: list[tuple[int, str]] = []
    for page in doc.pages:
        heads = {off: (lvl, txt) for off, lvl, txt in page.headings}
        pos = 0
        for line in page.markdown.splitlines(keepends=True):
            start = pos
            pos += len(line)
            new_section = start in heads
            clause = clauses and not new_section and _CLAUSE.match(line) is not None
            if new_section:
                lvl, txt = heads[start]
                stack = [h for h in stack if h[0] < lvl] + [(lvl, txt)]
            heading = count.head(" > ".join(t for _, t in stack), heading_budget)
            words = list(_SPACE.finditer(line))
            if not words:
                continue
            cur_start, cur_tokens, first = words[0].start(), 0, True
            for i, m in enumerate(words):
                n = count.word(m.group())
                if cur_tokens and cur_tokens + n > max_piece:
                    out.append(_Piece(page.number, start + cur_start, start + words[i - 1].end(), cur_tokens, heading,
                                      (new_section or clause) and first))
                    cur_start, cur_tokens, first = m.start(), 0, False
                cur_tokens += n
            out.append(_Piece(page.number, start + cur_start, start + words[-1].end(), cur_tokens, heading,
                              (new_section or clause) and first))
    return out


def chunk_document(doc: Document, count: TokenCounter, *, chunk_tokens: int = 512, overlap: int = 64,
                   prefix_tokens: int = 128, use_prefix: bool = True, heading_tokens: int = 48,
                   long_pages: int = 0, long_chunk_tokens: int = 0, long_prefix_tokens: int = 0) -> list[Chunk]:
    long = bool(long_chunk_tokens) and len(doc.pages) >= long_pages
    if long:
        chunk_tokens, overlap = long_chunk_tokens, min(overlap, long_chunk_tokens // 4)
        prefix_tokens = long_prefix_tokens or prefix_tokens
    if overlap >= chunk_tokens:
        raise ValueError("chunk overlap must be smaller than the chunk size")
    prefix = document_prefix(doc, count, prefix_tokens) if use_prefix and prefix_tokens > 0 else ""
    pieces = _pieces(doc, count, max(8, min(overlap, chunk_tokens // 4)) if overlap else chunk_tokens, heading_tokens,
                     clauses=long)
    pages = {p.number: p for p in doc.pages}
    groups: list[list[_Piece]] = []
    cur: list[_Piece] = []
    used = 0
    for piece in pieces:
        if cur and (used + piece.tokens > chunk_tokens or (piece.section_start and used >= chunk_tokens / 3)):
            groups.append(cur)
            if piece.section_start:
                cur, used = [], 0
            else:  # carry the tail over as overlap
                tail, t = [], 0
                for p in reversed(cur):
                    if t + p.tokens > overlap:
                        break
                    tail.insert(0, p)
                    t += p.tokens
                cur, used = tail, t
        cur.append(piece)
        used += piece.tokens
    if cur and (not groups or cur[-1] is not groups[-1][-1]):
        groups.append(cur)

    chunks = []
    for i, g in enumerate(groups):
        spans: list[tuple[int, int, int]] = []
        for p in g:
            if spans and spans[-1][0] == p.page:
                spans[-1] = (p.page, spans[-1][1], p.end)
            else:
                spans.append((p.page, p.start, p.end))
        body = "\n".join(pages[pg].markdown[s:e] for pg, s, e in spans)
        chunks.append(Chunk(chunk_id(doc.doc_hash, i), doc.doc_hash, doc.name, i, g[0].heading, body, prefix, spans))
    return chunks
