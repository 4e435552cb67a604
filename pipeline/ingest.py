"""Stage 1 — PDF to cleaned Markdown per page, with word boxes.

pymupdf4llm in its fast (non-layout) mode gives Markdown with headings; PyMuPDF
gives every word's box. The two are aligned once here, so every character of a
page's Markdown knows which PDF word it came from: any chunk can later be drawn
on its page from these boxes, with no fuzzy matching at display time.
"""
from __future__ import annotations

import hashlib
import re
from collections import Counter
from difflib import SequenceMatcher
from pathlib import Path

import pymupdf
import pymupdf4llm

from .types import Document, Page

pymupdf4llm.use_layout(False)  # fast mode: ~10x faster than the layout model
pymupdf.TOOLS.mupdf_display_errors(False)

_WORD = re.compile(r"\w+", re.UNICODE)
_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
_BOLD_LINE = re.compile(r"^\s*\*\*([^*]{2,120})\*\*\s*:?\s*$")
_RUN_IN = re.compile(r"^\s*\*\*([^*]{2,80}?)\s*[.:]\s*\*\*")  # "**Склад.** text..." run-in heading
_MD_NOISE = re.compile(r"[*_`#|>\[\]]+")


class IngestError(ValueError):
    """A PDF that cannot be read; the message is meant for the user."""


def file_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _line_key(line: str) -> str:
    s = _MD_NOISE.sub(" ", line).strip().lower()
    s = re.sub(r"\d+", "#", s)
    return re.sub(r"\s+", " ", s)


def _is_page_number(key: str) -> bool:
    return bool(key) and re.fullmatch(r"[#\W]*#[#\W]*|(стор(інка)?|page|с)\.?\s*#(\s*(з|із|of|/)\s*#)?", key) is not None


def _clean_pages(texts: list[str], share: float) -> list[str]:
    """Drop running headers/footers: lines repeating on most pages, and bare page numbers."""
    n = len(texts)
    seen = Counter()
    for t in texts:
        seen.update({_line_key(line) for line in t.splitlines() if _line_key(line)})
    limit = max(2, share * n)
    repeated = {k for k, c in seen.items() if n >= 2 and c >= limit and (n >= 3 or len(k) >= 12)}
    out = []
    for t in texts:
        keep = []
        for line in t.splitlines():
            key = _line_key(line)
            if key and (key in repeated or _is_page_number(key)):
                continue
            keep.append(line)
        out.append(re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip())
    return out


def _align(markdown: str, words: list) -> list[int]:
    """For each character of ``markdown``, the index of the PDF word it shows (or -1)."""
    md = [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(markdown)]
    pw = [(m.group().lower(), i) for i, w in enumerate(words) for m in _WORD.finditer(w[4])]
    word_at = [-1] * len(markdown)
    sm = SequenceMatcher(None, [t for t, _, _ in md], [t for t, _ in pw], autojunk=False)
    for a, b, size in sm.get_matching_blocks():
        for k in range(size):
            _, start, end = md[a + k]
            wi = pw[b + k][1]
            for c in range(start, end):
                word_at[c] = wi
    return word_at


def _headings(markdown: str) -> list[tuple[int, int, str]]:
    out, pos = [], 0
    for line in markdown.splitlines(keepends=True):
        m = _HEADING.match(line.rstrip("\n"))
        if m:
            out.append((pos, len(m.group(1)), _MD_NOISE.sub("", m.group(2)).strip()))
        else:
            b = _BOLD_LINE.match(line.rstrip("\n")) or _RUN_IN.match(line)
            if b:
                out.append((pos, 6, b.group(1).strip()))
        pos += len(line)
    return [h for h in out if h[2]]


def open_pdf(data: bytes, name: str) -> pymupdf.Document:
    """Open a PDF or raise :class:`IngestError` saying, in plain words, why not."""
    if not data:
        raise IngestError(f"{name}: the file is empty")
    if not data.lstrip()[:1024].startswith(b"%PDF") and b"%PDF" not in data[:1024]:
        raise IngestError(f"{name}: not a PDF file")
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as e:  # pymupdf raises several types for broken files
        raise IngestError(f"{name}: the PDF is damaged and cannot be read ({e})") from None
    if doc.needs_pass or doc.is_encrypted:
        raise IngestError(f"{name}: the PDF is password-protected")
    if doc.page_count == 0:
        raise IngestError(f"{name}: the PDF has no pages")
    return doc


def parse_pdf(data: bytes, name: str, *, max_pages: int = 2000, repeated_line_share: float = 0.6) -> Document:
    """Parse PDF bytes into a :class:`Document` (raises :class:`IngestError`)."""
    doc = open_pdf(data, name)
    if doc.page_count > max_pages:
        raise IngestError(f"{name}: {doc.page_count} pages is over the limit of {max_pages}")
    try:
        chunks = pymupdf4llm.to_markdown(doc, page_chunks=True, show_progress=False, ignore_images=True, ignore_graphics=True)
        words = [doc[i].get_text("words", sort=True) for i in range(doc.page_count)]
    except Exception as e:
        raise IngestError(f"{name}: the PDF could not be parsed ({e})") from None
    texts = _clean_pages([c.get("text", "") for c in chunks], repeated_line_share)
    pages = []
    for i, (md, ws) in enumerate(zip(texts, words)):
        rect = doc[i].rect
        boxes = [(w[0], w[1], w[2], w[3], w[4]) for w in ws]
        pages.append(Page(i + 1, rect.width, rect.height, md, boxes, _align(md, boxes), _headings(md)))
    if not any(p.markdown.strip() for p in pages):
        raise IngestError(f"{name}: no text layer was found (a scanned or image-only PDF)")
    warnings = [f"page {p.number} has no text" for p in pages if not p.markdown.strip()]
    return Document(file_hash(data), Path(name).name, pages, warnings)
