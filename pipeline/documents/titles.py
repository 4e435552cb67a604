"""A document's human title: its PDF metadata title, else its first heading, else its first line.

Metadata titles are often junk ("Microsoft Word - x.doc", "untitled", the file
name, a hash, mojibake) and are refused; so is one that belongs to another
document (a file made from another one's template keeps that one's title): most
of its words must occur in the document's first pages. Headings and lines are taken from the
first pages' cleaned Markdown (Markdown and HTML markers removed); a heading is
a Markdown ``#`` line (a larger font), not a bold label. A title that is one
word ("ІНСТРУКЦІЯ") takes the next lines with it ("ІНСТРУКЦІЯ для медичного
застосування препарату АМОКСИЦИЛІН"), up to a label ("Склад:") or a heading. Long
titles are cut at a clause boundary (", ", "; ", " — ") or a word, with "…".

An official document opens with its approval stamp ("ЗАТВЕРДЖЕНО / Заступник Міністра … / Олексій НІКІТЕНКО /
___ 2025 р.", "ПОГОДЖЕНО Протокол № 3"): the stamp word's line and the signatory's lines after it (positions,
institutions, names, dates and numbers) are boilerplate, never the title; the title is what follows ("ПРАВИЛА
спортивних змагань з …").
"""
from __future__ import annotations

import re
import unicodedata
from pathlib import PurePath
from typing import Sequence

import pymupdf

from ..types import Page

MAX_CHARS = 80
_PAGES = 2  # headings and lines are looked for on the first pages only
_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_MARKS = re.compile(r"[*_`#|>\[\]]+")
_JUNK = {"untitled", "untitled document", "document", "new document", "title", "без назви", "без імені",
         "документ", "новий документ", "microsoft word", "slide 1", "слайд 1", "presentation", "none", "null"}
_APP_PREFIX = re.compile(r"^\s*(microsoft\s+(word|excel|powerpoint|office\s+word)|word|powerpoint|excel|"
                         r"writer|libreoffice|openoffice)\s*[-–—:]\s*", re.IGNORECASE)
_FILE_EXT = re.compile(r"\.(docx?|pdf|odt|ods|odp|rtf|txt|xlsx?|pptx?|indd|tex|dvi|html?|xml|jpe?g|png|tiff?|"
                       r"bmp|gif|ps|eps|pages|wpd)\s*$", re.IGNORECASE)
_HEXLIKE = re.compile(r"^[0-9a-f]{12,}$|^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
_CLAUSE = re.compile(r"[,;:]\s|\s[—–-]\s")
_WORD = re.compile(r"[^\W\d_]{4,}")  # a word of four letters or more (not "для", "при", "the")
_STEM = 5  # words are compared by their first letters, so that inflected forms match ("архів", "архівних")
_COMMENT = re.compile(r"<!--.*?(-->|$)")
# an approval stamp's opening word (Ukrainian, Russian, English), and what its signatory lines hold
_STAMP = re.compile(r"^(ЗАТВЕРДЖЕН[ОІАИ]Й?|ЗАТВЕРДЖУЮ|ПОГОДЖЕН[ОІАИ]Й?|ПОГОДЖУЮ|УХВАЛЕН[ОІАИ]Й?|СХВАЛЕН[ОІАИ]Й?|"
                    r"УТВЕРЖД[А-Я]+|СОГЛАСОВАН[ОА]|APPROVED|AGREED)(\W|$)", re.IGNORECASE)
_SIGNATORY = re.compile(r"міністр|заступник|голов[аиі]|директор|президент|ректор|начальник|керівник|секретар|"
                        r"наказ|протокол|рішенн|постанов|засіданн|україн|федераці|комітет|департамент|управлінн|"
                        r"підпис|№|\b(19|20)\d\d\b|\bвід\b|\bм\.\s?п\b", re.IGNORECASE)
_UP, _LOW = "A-ZА-ЯІЇЄҐ", "a-zа-яіїєґ'’\\-"
_NAME = re.compile(rf"^([{_UP}][{_LOW}]+\s+)?([{_UP}]\.\s?){{0,2}}[{_UP}'’\-]{{3,}}$|^([{_UP}]\.\s?){{1,2}}[{_UP}][{_LOW}]+$")


def clean(text: str) -> str:
    """One line of plain text: no Markdown/HTML markers, control or bidi characters, runs of spaces."""
    text = _MARKS.sub(" ", _TAG.sub("", _COMMENT.sub("", unicodedata.normalize("NFC", str(text)))))
    text = "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c for c in text)
    text = re.sub(r"\s+([®™©])", r"\1", " ".join(text.split()))  # "ЕЛОКОМ <sup>®</sup>" -> "ЕЛОКОМ®"
    return text.strip(" .:;,-–—")


def _letters(s: str) -> int:
    return sum(c.isalpha() for c in s)


def _mojibake(s: str) -> bool:
    """UTF-8 read as Latin-1 ("Ð†Ð½Ñ"), a replacement character, or a UTF-16 byte-order mark shown as text."""
    if "\ufffd" in s or "þÿ" in s or "ÿþ" in s:
        return True
    latin1 = sum("\u00c0" <= c <= "\u00ff" for c in s)
    return latin1 >= 3 and latin1 > 0.3 * _letters(s)


def usable(title: str, file_name: str = "") -> bool:
    """Whether a candidate reads as a title: enough letters, not an application's placeholder, not a
    file name (the document's own or any "x.doc", "C:\\path"), not a hash or code, not mojibake."""
    t = clean(title)
    if _letters(t) < 3 or _letters(t) < 0.4 * len(t.replace(" ", "")):
        return False
    low = t.lower()
    if low in _JUNK or _APP_PREFIX.match(title or "") or _mojibake(t):
        return False
    if _FILE_EXT.search(t) or "\\" in t or re.search(r"\w/\w+/", t):
        return False
    stem = PurePath(str(file_name).replace("\\", "/")).stem.lower() if file_name else ""
    if stem and low in (stem, clean(stem.replace("_", " ")).lower()):
        return False
    raw = " ".join(_TAG.sub("", str(title)).split()).strip("*#` ")
    if " " not in raw:  # one token: a word is fine, a code ("scan0001", "IMG_2024", a hash) is not
        if _HEXLIKE.match(raw) or any(c.isdigit() for c in raw) or "_" in raw or len(raw) > 40:
            return False
    return True


def shorten(title: str, max_chars: int = MAX_CHARS) -> str:
    """``title`` cut to ``max_chars``: at the last clause boundary if one leaves half of it, else at a word."""
    t = clean(title)
    if len(t) <= max_chars:
        return t
    head = t[:max_chars]
    cuts = [m.start() for m in _CLAUSE.finditer(head) if m.start() >= max_chars // 3]
    if cuts:
        return head[:cuts[-1]].rstrip(" .,;:-–—")
    word = head[:max_chars - 1].rsplit(" ", 1)[0] if " " in head else head[:max_chars - 1]
    return word.rstrip(" .,;:-–—") + "…"


def _metadata_title(pdf) -> str:
    if pdf is None:
        return ""
    try:
        if isinstance(pdf, (bytes, bytearray)):
            with pymupdf.open(stream=bytes(pdf), filetype="pdf") as doc:
                return (doc.metadata or {}).get("title") or ""
        return (pdf.metadata or {}).get("title") or ""
    except Exception:  # a damaged or encrypted file: no metadata, the text fallbacks still work
        return ""


def _stems(text: str) -> list[str]:
    return [w.lower()[:_STEM] for w in _WORD.findall(text)]


def belongs(title: str, texts: Sequence[str]) -> bool:
    """Whether ``title`` is this document's: more than half of its words (four letters or more, compared by
    their first five letters) occur in ``texts`` (the first pages' Markdown). A title with no such word, or
    a document with no text to compare with (a scan without OCR), is believed."""
    words = _stems(title)
    body = set(_stems(" ".join(texts)))
    if not words or not body:
        return True
    return sum(w in body for w in words) > len(words) / 2


def _signatory(line: str) -> bool:
    """Whether a (clean) line after a stamp word continues the stamp: empty, a continuation in lower case, a
    position, institution, name, date or number. A line opening with a word in capitals ("ПРАВИЛА …") does not."""
    if not line:
        return True
    first = line.split()[0]
    if len(first) >= 4 and first.isalpha() and first.isupper():
        return False
    return line[0].islower() or bool(_SIGNATORY.search(line)) or bool(_NAME.match(line))


def stamp_lines(lines: list[str], most: int = 8) -> set[int]:
    """The indexes of an approval stamp's lines: a line opening with a stamp word and up to ``most`` signatory
    lines after it (:func:`_signatory`)."""
    out: set[int] = set()
    i = 0
    while i < len(lines):
        if not _STAMP.match(clean(lines[i])):
            i += 1
            continue
        out.add(i)
        i, taken = i + 1, 0
        while i < len(lines) and taken < most and _signatory(clean(lines[i])):
            taken += bool(clean(lines[i]))
            out.add(i)
            i += 1
    return out


def _markdown(pages: Sequence[Page | str]) -> list[str]:
    return [p if isinstance(p, str) else p.markdown for p in list(pages)[:_PAGES]]


def _with_next_lines(lines: list[str], i: int, max_chars: int) -> str:
    """Line ``i``, and when it is a single word, the next lines of its block while they fit."""
    title = clean(lines[i])
    if len(title.split()) > 1:
        return title
    for raw in [r for r in lines[i + 1:i + 12] if clean(r)][:3]:  # Markdown puts blank lines between
        nxt = clean(raw)
        heading = raw.lstrip().startswith("#") and not nxt[:1].islower()  # a heading in lower case continues it
        if heading or raw.rstrip(" *_").endswith(":") or _letters(nxt) < 2 \
                or len(title) + 1 + len(nxt) > max_chars:  # a new heading, a label ("Склад:"), too long
            break
        title = f"{title} {nxt}"
    return title


def _first_heading(texts: list[str], name: str, max_chars: int) -> str:
    """The first of the most important Markdown headings (``#`` lines, from font sizes) on the first
    page that has one; bold lines and run-in labels ("**Склад:**") are section names, not titles."""
    for md in texts:
        lines = md.splitlines()
        stamp = stamp_lines(lines)
        heads = [(len(m.group(1)), i) for i, line in enumerate(lines)
                 if i not in stamp and (m := _HEADING.match(line)) and usable(m.group(2), name)]
        if heads:
            return _with_next_lines(lines, min(heads)[1], max_chars)
    return ""


def _after_stamp(texts: list[str], name: str, max_chars: int) -> str:
    """The first usable line after an approval stamp (an official document's title follows its stamp)."""
    for md in texts:
        lines = md.splitlines()
        stamp = stamp_lines(lines)
        if stamp:
            for i in range(max(stamp) + 1, len(lines)):
                if usable(_HEADING.sub(r"\2", lines[i]), name):
                    return _with_next_lines(lines, i, max_chars)
            return ""
    return ""


def _first_line(texts: list[str], name: str, max_chars: int) -> str:
    for md in texts:
        lines = md.splitlines()
        stamp = stamp_lines(lines)
        for i, line in enumerate(lines):
            if i not in stamp and usable(line, name):
                return _with_next_lines(lines, i, max_chars)
    return ""


def title_of(pdf, pages: Sequence[Page | str], name: str = "", max_chars: int = MAX_CHARS) -> str:
    """The document's title for people: PDF metadata title if usable and the document's own (:func:`belongs`,
    judged on the words shown), else first heading, else first line.

    ``pdf`` is the PDF's bytes or an open ``pymupdf.Document`` (or None); ``pages`` the parsed
    :class:`Page` objects or their Markdown; ``name`` the file name (a metadata title equal to it is
    refused; with nothing else usable its stem is the title). After an approval stamp, the line that follows
    it comes before any heading. At most ``max_chars`` characters.
    """
    meta = clean(_metadata_title(pdf))
    texts = _markdown(pages)
    shown = shorten(meta, max_chars)  # judged as shown: a long one's tail (a leaflet's packaging) is on later pages
    if usable(meta, name) and belongs(shown, texts):
        return shown
    for found in (_after_stamp(texts, name, max_chars), _first_heading(texts, name, max_chars),
                  _first_line(texts, name, max_chars)):
        if found:
            return shorten(found, max_chars)
    stem = " ".join(PurePath(str(name).replace("\\", "/")).stem.split())  # as it is: "scan_0001"
    return stem if len(stem) <= max_chars else stem[:max_chars - 1] + "…"
