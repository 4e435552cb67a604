"""Stage 1 — PDF to cleaned Markdown per page, with word boxes.

pymupdf4llm in its fast (non-layout) mode gives Markdown with headings; PyMuPDF
gives every word's box. The two are aligned once here, so every character of a
page's Markdown knows which PDF word it came from: any chunk can later be drawn
on its page from these boxes, with no fuzzy matching at display time.

Pages that draw something but have no text layer (scans) are read by Tesseract
through PyMuPDF; the OCR'd words get their boxes the same way. Every file that
cannot be read raises :class:`IngestError` with a message for the user that
names the file (made safe by :func:`safe_name`).
"""
from __future__ import annotations

import hashlib
import logging
import math
import re
import time
import unicodedata
from collections import Counter
from difflib import SequenceMatcher
from pathlib import Path

import pymupdf
import pymupdf4llm

from ..errors import IngestError
from ..text import WORD
from .page_budget import heavy_page
from .titles import title_of
from ..types import Document, Page

pymupdf4llm.use_layout(False)  # fast mode: ~10x faster than the layout model
pymupdf.TOOLS.mupdf_display_errors(False)

_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
_BOLD_LINE = re.compile(r"^\s*\*\*([^*]{2,120})\*\*\s*:?\s*$")
_RUN_IN = re.compile(r"^\s*\*\*([^*]{2,80}?)\s*[.:]\s*\*\*")  # "**Склад.** text..." run-in heading
_MD_NOISE = re.compile(r"[*_`#|>\[\]]+")
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")  # can make "fdp.exe" show as "exe.pdf"
_NAME_CHARS = 120
_BATCH = 32  # pages per pymupdf4llm call; the deadline is checked between batches
OCR_MAX_PIXELS = 25_000_000  # a page picture for OCR never exceeds this: the DPI is lowered for huge pages
_DEBIAN_TESSDATA = ["/usr/share/tesseract-ocr/5/tessdata", "/usr/share/tesseract-ocr/4.00/tessdata"]
_NO_TESSERACT = "install tesseract-ocr and tesseract-ocr-ukr, or set TESSDATA_PREFIX"
log = logging.getLogger(__name__)


def list_pdfs(folder: Path | str) -> list[Path]:
    """The PDFs directly in ``folder`` (by extension, any case), sorted by name."""
    return sorted(p for p in Path(folder).iterdir() if p.suffix.lower() == ".pdf")


def file_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _line_key(line: str) -> str:
    s = _MD_NOISE.sub(" ", line).strip().lower()
    s = re.sub(r"\d+", "#", s)
    return re.sub(r"\s+", " ", s)


def _is_page_number(key: str) -> bool:
    return bool(key) and re.fullmatch(r"[#\W]*#[#\W]*|(стор(інка)?|page|с)\.?\s*#(\s*(з|із|of|/)\s*#)?", key) is not None


def _edges(lines: list[str], edge_lines: int) -> set[int]:
    """Indices of the first and last ``edge_lines`` non-empty lines (all lines when ``edge_lines`` is 0)."""
    filled = [i for i, line in enumerate(lines) if _line_key(line)]
    return set(filled[:edge_lines] + filled[-edge_lines:]) if edge_lines else set(filled)


def _clean_pages(texts: list[str], share: float, edge_lines: int = 0) -> list[str]:
    """Drop running headers/footers: lines repeating on most pages, and bare page numbers.

    With ``edge_lines`` > 0 only the first and last ``edge_lines`` lines of a page can be a running
    line: in templated rulebooks a clause that differs from page to page only in its numbers
    ("12.4. Внесок становить 600 грн") repeats on most pages too, and must stay.
    """
    n = len(texts)
    seen = Counter()
    for t in texts:
        lines = t.splitlines()
        seen.update({_line_key(lines[i]) for i in _edges(lines, edge_lines)})
    limit = max(2, share * n)
    repeated = {k for k, c in seen.items() if n >= 2 and c >= limit and (n >= 3 or len(k) >= 12)}
    out = []
    for t in texts:
        lines = t.splitlines()
        edges = _edges(lines, edge_lines)
        keep = []
        for i, line in enumerate(lines):
            key = _line_key(line)
            if i in edges and (key in repeated or _is_page_number(key)):
                continue
            keep.append(line)
        out.append(re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip())
    return out


def _align(markdown: str, words: list) -> list[int]:
    """For each character of ``markdown``, the index of the PDF word it shows (or -1)."""
    md = [(m.group().lower(), m.start(), m.end()) for m in WORD.finditer(markdown)]
    pw = [(m.group().lower(), i) for i, w in enumerate(words) for m in WORD.finditer(w[4])]
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


def check_size(name: str, size: int, limit_mb: float) -> None:
    """Refuse a file over the upload limit (MB = 2**20 bytes) — callers check before reading it when they can."""
    if size > limit_mb * 2**20:
        raise IngestError(f"{name}: the file is {size / 2**20:.4g} MB, over the limit of {limit_mb:g} MB "
                          "(PDFQA_MAX_UPLOAD_MB); nothing was read")


def safe_name(name: str) -> str:
    """A file name fit to store and show: the base name only, no control characters, NFC, at most 120 characters."""
    name = unicodedata.normalize("NFC", str(name)).replace("\\", "/").rsplit("/", 1)[-1]
    name = re.sub(r"\s+", " ", name)
    name = "".join(c for c in name if unicodedata.category(c) not in ("Cc", "Cs") and c not in _BIDI).strip()
    if not name.strip("."):
        return "document.pdf"
    stem, ext = (name[:-4], name[-4:]) if name.lower().endswith(".pdf") else (name, "")
    return stem[: _NAME_CHARS - len(ext)].rstrip() + ext if stem.strip() else "document.pdf"


class Deadline:
    """The time one document may take; :meth:`check` raises :class:`IngestError` once it has passed."""

    def __init__(self, name: str, seconds: float | None):
        self.name, self.seconds = name, seconds
        self.end = None if seconds is None else time.monotonic() + seconds

    def check(self) -> None:
        if self.end is not None and time.monotonic() > self.end:
            raise IngestError(f"{self.name}: took longer than {self.seconds:g} s (PDFQA_MAX_DOC_SECONDS); "
                              "nothing was stored")


def open_pdf(data: bytes, name: str) -> pymupdf.Document:
    """Open a PDF or raise :class:`IngestError` saying, in plain words, why not."""
    if not data:
        raise IngestError(f"{name}: the file is empty")
    if not data.lstrip()[:1024].startswith(b"%PDF") and b"%PDF" not in data[:1024]:
        raise IngestError(f"{name}: not a PDF file")
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
        n_pages = 0 if doc.needs_pass or doc.is_encrypted else doc.page_count
    except Exception as e:  # pymupdf raises several types for broken files
        reason = re.sub(r"^code=\d+: ", "", str(e))  # MuPDF's "code=7: Invalid number of pages"
        raise IngestError(f"{name}: the PDF is damaged and cannot be read ({reason})") from None
    if doc.needs_pass or doc.is_encrypted:
        raise IngestError(f"{name}: the PDF is password-protected")
    if n_pages == 0 and doc.is_repaired:  # MuPDF rebuilt its cross-references and found no page: cut short
        raise IngestError(f"{name}: the PDF is damaged (truncated or corrupt)")
    if n_pages == 0:
        raise IngestError(f"{name}: the PDF has no pages")
    return doc


def tessdata(languages: str) -> tuple[str, str] | None:
    """Tesseract's language folder and those of ``languages`` ("ukr+eng") found in it; None without any."""
    folders = list(_DEBIAN_TESSDATA)
    try:
        folders.insert(0, pymupdf.get_tessdata())  # $TESSDATA_PREFIX, else where the tesseract program keeps it
    except Exception:  # no Tesseract installation found
        pass
    for folder in folders:
        have = [lang for lang in languages.split("+") if (Path(folder) / f"{lang}.traineddata").is_file()]
        if have:
            return folder, "+".join(have)
    return None


def ocr_page(page: pymupdf.Page, folder: str, languages: str, dpi: int) -> tuple[str, list]:
    """A page's text and word boxes read by Tesseract (within MuPDF) from its picture at ``dpi``, capped in pixels."""
    dpi = max(1, min(dpi, int(72 * math.sqrt(OCR_MAX_PIXELS / max(1.0, page.rect.width * page.rect.height)))))
    tp = page.get_textpage_ocr(language=languages, dpi=dpi, full=True, tessdata=folder)
    text = "\n".join(line.strip() for line in page.get_text("text", textpage=tp).splitlines() if line.strip())
    return text, page.get_text("words", textpage=tp, sort=True)


def page_list(numbers: list[int]) -> str:
    """[1, 2, 3, 5] -> "pages 1–3, 5"."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    text = ", ".join(f"{a}–{b}" if b > a else f"{a}" for a, b in runs)
    return f"page{'s' if len(numbers) > 1 else ''} {text}"


def parse_pdf(data: bytes, name: str, *, max_pages: int = 1000, repeated_line_share: float = 0.6, edge_lines: int = 0,
              ocr: bool = True, ocr_languages: str = "ukr+eng", ocr_dpi: int = 200,
              deadline: Deadline | None = None, max_page_content_mb: float | None = 50.0) -> Document:
    """Parse PDF bytes into a :class:`Document` (raises :class:`IngestError`).

    Pages without a text layer are read by OCR when ``ocr`` is on. ``deadline``
    is checked between batches of pages and between OCR'd pages. A page whose
    drawing instructions inflate to over ``max_page_content_mb`` refuses the
    document before anything is parsed (:mod:`.page_budget`; None: no limit).
    """
    name = safe_name(name)
    doc = open_pdf(data, name)
    if doc.page_count > max_pages:
        raise IngestError(f"{name}: {doc.page_count} pages is over the limit of {max_pages} pages per document "
                          "(PDFQA_MAX_PAGES)")
    deadline = deadline or Deadline(name, None)
    try:
        if max_page_content_mb is not None:
            heavy = heavy_page(doc, int(max_page_content_mb * 2**20), deadline.check)
            if heavy:
                raise IngestError(f"{name}: page {heavy} holds over {max_page_content_mb:g} MB of drawing instructions "
                                  "once decompressed, over the limit per page (PDFQA_MAX_PAGE_CONTENT_MB); "
                                  "nothing was read")
        return _parse(doc, data, name, (repeated_line_share, edge_lines), ocr, ocr_languages, ocr_dpi, deadline)
    except IngestError:
        raise
    except Exception as e:  # whatever a hostile file makes MuPDF raise: this file fails, the batch goes on
        log.warning("parsing %s failed", name, exc_info=True)
        raise IngestError(f"{name}: the PDF could not be parsed ({type(e).__name__}: {e})") from None


def _parse(doc, data, name, running, ocr, ocr_languages, ocr_dpi, deadline) -> Document:
    headers = pymupdf4llm.IdentifyHeaders(doc)  # font sizes of headings, from the whole document
    texts, words = [], []
    for start in range(0, doc.page_count, _BATCH):
        deadline.check()
        batch = list(range(start, min(start + _BATCH, doc.page_count)))
        chunks = pymupdf4llm.to_markdown(doc, pages=batch, hdr_info=headers, page_chunks=True, show_progress=False,
                                         ignore_images=True, ignore_graphics=True)
        texts += [c.get("text", "") for c in chunks]
        words += [doc[i].get_text("words", sort=True) for i in batch]
    # pages that draw something but have no text layer: scans, read by OCR
    scanned = [i for i, ws in enumerate(words) if not ws and doc[i].get_bboxlog()]
    setup = tessdata(ocr_languages) if ocr and scanned else None
    for i in scanned if setup else []:
        deadline.check()
        texts[i], words[i] = ocr_page(doc[i], *setup, ocr_dpi)
    texts = _clean_pages(texts, *running)
    pages = []
    for i, (md, ws) in enumerate(zip(texts, words)):
        rect = doc[i].rect
        boxes = [(w[0], w[1], w[2], w[3], w[4]) for w in ws]
        pages.append(Page(i + 1, rect.width, rect.height, md, boxes, _align(md, boxes), _headings(md)))
    read = [i + 1 for i in scanned if setup and pages[i].markdown.strip()]
    empty = [p.number for p in pages if not p.markdown.strip()]
    no_ocr = "" if setup or not scanned else "OCR is off" if not ocr else f"OCR is unavailable: {_NO_TESSERACT}"
    if len(empty) == len(pages):
        raise IngestError(f"{name}: " + (
            "the PDF is damaged and no text could be read from it" if doc.is_repaired else
            "no text found (the pages are blank)" if not scanned else
            f"no text layer was found (a scanned or image-only PDF; {no_ocr})" if no_ocr else
            "no text found (not even by OCR)"))
    warnings = ["the PDF was damaged and repaired: some text may be missing"] if doc.is_repaired else []
    if read:
        warnings.append(f"{page_list(read)} read by OCR ({setup[1]})")
    if empty:
        warnings.append(f"{page_list(empty)}: no text" + (f"; {no_ocr}" if no_ocr else ""))
    if doc.embfile_count():
        warnings.append(f"has {doc.embfile_count()} attached file(s), not read")
    return Document(file_hash(data), name, pages, warnings, title_of(doc, pages, name))
