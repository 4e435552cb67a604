"""Generators of test/demo PDFs, built with PyMuPDF only.

Every public function returns PDF bytes (or, for ``not_a_pdf``, bytes that are
not a PDF). Output is deterministic: the same arguments give the same bytes.

Text uses MuPDF's built-in Helvetica / Helvetica-Bold (Nimbus Sans), which carry
Cyrillic glyphs, so nothing depends on system fonts. They are embedded as
subset Type0 fonts with a ToUnicode map, so ``page.get_text()`` gives back the
exact Ukrainian text (і ї є ґ ’ « » · — № included). A character missing from
those fonts is drawn by PyMuPDF's fallback (a bundled Noto font).
"""
from __future__ import annotations

import random
import re
import zlib
from functools import lru_cache
from typing import Sequence

import pymupdf

# --- page geometry (A4, points) -------------------------------------------
PAGE_W, PAGE_H = pymupdf.paper_size("a4")  # 595 x 842
MARGIN_L = MARGIN_R = 62.0
MARGIN_T = 64.0
MARGIN_B = 72.0  # body text stops here; the footer sits below
TEXT_W = PAGE_W - MARGIN_L - MARGIN_R

TITLE_SIZE = 17.0
HEAD_SIZE = 13.0
BODY_SIZE = 10.5
TABLE_SIZE = 9.5
FOOTER_SIZE = 8.0

DEFAULT_FOOTER = "Документ ТОВ «Приклад»"
_FIXED_DATE = "D:20240301120000+02'00'"


@lru_cache(maxsize=None)
def _font(bold: bool = False) -> pymupdf.Font:
    return pymupdf.Font("hebo" if bold else "helv")


def footer_text(footer: str, page_no: int, n_pages: int) -> str:
    """The running footer as it is printed on page ``page_no`` (1-based)."""
    return f"{footer} · сторінка {page_no} з {n_pages}"


def normalize(text: str) -> str:
    """Collapse all whitespace to single spaces (for comparing extracted text)."""
    return re.sub(r"\s+", " ", text).strip()


def _wrap(text: str, font: pymupdf.Font, size: float, width: float) -> list[str]:
    """Greedy word wrap by measured width; words wider than a line are cut."""
    lines: list[str] = []
    cur = ""
    for word in text.split():
        cand = f"{cur} {word}" if cur else word
        if font.text_length(cand, fontsize=size) <= width:
            cur = cand
            continue
        if cur:
            lines.append(cur)
        cur = word
        while font.text_length(cur, fontsize=size) > width:  # overlong word
            cut = len(cur) - 1
            while cut > 1 and font.text_length(cur[:cut], fontsize=size) > width:
                cut -= 1
            lines.append(cur[:cut])
            cur = cur[cut:]
    if cur:
        lines.append(cur)
    return lines


class _Layout:
    """Flows lines top to bottom, opening a new page when one is full."""

    def __init__(self, doc: pymupdf.Document):
        self.doc = doc
        self.page: pymupdf.Page | None = None
        self.writer: pymupdf.TextWriter | None = None
        self.y = 0.0
        self.new_page()

    @property
    def room(self) -> float:
        return PAGE_H - MARGIN_B - self.y

    def flush(self) -> None:
        if self.page is not None and self.writer is not None:
            self.writer.write_text(self.page)

    def new_page(self) -> None:
        self.flush()
        self.page = self.doc.new_page(width=PAGE_W, height=PAGE_H)
        self.writer = pymupdf.TextWriter(self.page.rect)
        self.y = MARGIN_T

    def ensure(self, height: float) -> None:
        if height > self.room and self.y > MARGIN_T:
            self.new_page()

    def line(self, text: str, size: float, bold: bool = False, x: float = MARGIN_L,
             leading: float | None = None) -> None:
        leading = leading or size * 1.38
        self.ensure(leading)
        self.writer.append((x, self.y + size), text, font=_font(bold), fontsize=size)
        self.y += leading

    def paragraph(self, text: str, size: float = BODY_SIZE, bold: bool = False,
                  indent: float = 0.0, after: float = 5.0) -> None:
        for ln in _wrap(text, _font(bold), size, TEXT_W - indent):
            self.line(ln, size, bold, x=MARGIN_L + indent)
        self.y += after

    def space(self, h: float) -> None:
        self.y = min(self.y + h, PAGE_H - MARGIN_B)


def _title(lay: _Layout, title: str) -> None:
    font = _font(True)
    for ln in _wrap(title, font, TITLE_SIZE, TEXT_W):
        w = font.text_length(ln, fontsize=TITLE_SIZE)
        lay.line(ln, TITLE_SIZE, bold=True, x=MARGIN_L + (TEXT_W - w) / 2, leading=TITLE_SIZE * 1.3)
    lay.space(14)


def _heading(lay: _Layout, heading: str, first_para: str) -> None:
    """Section heading, kept together with at least two lines of its text."""
    head_lines = _wrap(heading, _font(True), HEAD_SIZE, TEXT_W)
    body_lines = min(2, len(_wrap(first_para, _font(False), BODY_SIZE, TEXT_W))) if first_para else 0
    need = 10 + len(head_lines) * HEAD_SIZE * 1.3 + 4 + body_lines * BODY_SIZE * 1.38
    lay.ensure(need)
    if lay.y > MARGIN_T:
        lay.space(10)
    for ln in head_lines:
        lay.line(ln, HEAD_SIZE, bold=True, leading=HEAD_SIZE * 1.3)
    lay.space(4)


def _paragraphs(body: str) -> list[str]:
    """A section body: one paragraph per non-empty line."""
    return [p.strip() for p in body.splitlines() if p.strip()]


def _table(lay: _Layout, rows: Sequence[Sequence[str]], size: float = TABLE_SIZE) -> None:
    """A ruled table; the first row is a bold header, repeated after a page break."""
    if not rows:
        return
    ncol = max(len(r) for r in rows)
    rows = [list(r) + [""] * (ncol - len(r)) for r in rows]
    pad = 4.0
    lead = size * 1.3
    natural = [max(40.0, 2 * pad + max(_font(r == 0).text_length(rows[r][c], fontsize=size)
                                        for r in range(len(rows)))) for c in range(ncol)]
    total = sum(natural)
    if total <= TEXT_W:
        widths = [w * TEXT_W / total for w in natural]
    else:  # long columns share what is left after the short ones
        widths = [min(w, TEXT_W / ncol) for w in natural]
        spare = TEXT_W - sum(widths)
        wants = [n - w for n, w in zip(natural, widths)]
        widths = [w + spare * want / sum(wants) for w, want in zip(widths, wants)]
    xs = [MARGIN_L]
    for w in widths:
        xs.append(xs[-1] + w)

    def cell_lines(r: int) -> list[list[str]]:
        return [_wrap(rows[r][c], _font(r == 0), size, widths[c] - 2 * pad) or [""] for c in range(ncol)]

    def draw_row(r: int) -> None:
        cells = cell_lines(r)
        h = max(len(c) for c in cells) * lead + 2 * pad
        top = lay.y
        page = lay.page
        if r == 0:
            page.draw_rect(pymupdf.Rect(xs[0], top, xs[-1], top + h), color=None, fill=(0.9, 0.9, 0.9))
        for c, lines in enumerate(cells):
            for k, ln in enumerate(lines):
                lay.writer.append((xs[c] + pad, top + pad + k * lead + size), ln, font=_font(r == 0), fontsize=size)
        page.draw_line((xs[0], top), (xs[-1], top), width=0.6)
        page.draw_line((xs[0], top + h), (xs[-1], top + h), width=0.6)
        for x in xs:
            page.draw_line((x, top), (x, top + h), width=0.6)
        lay.y = top + h

    lay.space(4)
    for r in range(len(rows)):
        h = max(len(c) for c in cell_lines(r)) * lead + 2 * pad
        if r == 0:
            h += max(len(c) for c in cell_lines(min(1, len(rows) - 1))) * lead + 2 * pad
        if h > lay.room and lay.y > MARGIN_T:
            lay.new_page()
            if r > 0:
                draw_row(0)
        draw_row(r)
    lay.space(8)


def _footers(doc: pymupdf.Document, footer: str) -> None:
    n = doc.page_count
    font = _font(False)
    for i, page in enumerate(doc):
        text = footer_text(footer, i + 1, n)
        y_line = PAGE_H - MARGIN_B + 22
        page.draw_line((MARGIN_L, y_line), (PAGE_W - MARGIN_R, y_line), color=(0.6, 0.6, 0.6), width=0.5)
        w = font.text_length(text, fontsize=FOOTER_SIZE)
        tw = pymupdf.TextWriter(page.rect, color=(0.35, 0.35, 0.35))
        tw.append(((PAGE_W - w) / 2, y_line + 14), text, font=font, fontsize=FOOTER_SIZE)
        tw.write_text(page)


def _finish(doc: pymupdf.Document, title: str, **save) -> bytes:
    doc.set_metadata({"title": title, "author": "tests/pdfgen.py", "creator": "tests/pdfgen.py",
                      "producer": "PyMuPDF", "creationDate": _FIXED_DATE, "modDate": _FIXED_DATE})
    doc.subset_fonts()
    return doc.tobytes(garbage=3, deflate=True, no_new_id=True, **save)


def _render(title, sections, footer, table, table_after, break_before_sections) -> pymupdf.Document:
    doc = pymupdf.open()
    lay = _Layout(doc)
    _title(lay, title)
    where = len(sections) - 1 if table_after is None else table_after
    if table and where < 0:
        _table(lay, table)
    for i, (heading, body) in enumerate(sections):
        paras = _paragraphs(body)
        if break_before_sections and i > 0:
            lay.new_page()
        _heading(lay, heading, paras[0] if paras else "")
        for p in paras:
            lay.paragraph(p)
        if table and i == where:
            _table(lay, table)
    lay.flush()
    if footer is not None:
        _footers(doc, footer)
    return doc


def ukrainian_pdf(title: str, sections: list[tuple[str, str]], footer: str | None = DEFAULT_FOOTER,
                  table: list[list[str]] | None = None, pages_hint: int | None = None, *,
                  table_after: int | None = None) -> bytes:
    """A multi-page A4 PDF with selectable Ukrainian text.

    ``sections`` are (heading, body) pairs; each non-empty line of a body is one
    paragraph. Text flows from page to page, so a long paragraph is split by a
    page break. ``table`` (first row = header) is drawn with ruling lines after
    section ``table_after`` (default: the last one; -1: before the first).
    ``footer`` is printed on every page as "<footer> · сторінка N з M"; None
    leaves pages without a footer. ``pages_hint`` is a minimum page count: if the
    flowed text is shorter, each section starts on a new page, and if that is
    still too short, "Для нотаток" pages are appended.
    """
    doc = _render(title, sections, footer, table, table_after, False)
    if pages_hint and doc.page_count < pages_hint:
        doc = _render(title, sections, None, table, table_after, True)
        while doc.page_count < pages_hint:
            page = doc.new_page(width=PAGE_W, height=PAGE_H)
            tw = pymupdf.TextWriter(page.rect)
            tw.append((MARGIN_L, MARGIN_T + HEAD_SIZE), "Для нотаток", font=_font(True), fontsize=HEAD_SIZE)
            tw.write_text(page)
        if footer is not None:
            _footers(doc, footer)
    return _finish(doc, title)


def rulebook_pdf(title: str, blocks: Sequence[tuple], header: str | None = None,
                 footer: str | None = DEFAULT_FOOTER) -> bytes:
    """A long regulation-style PDF flowed from ``blocks``, with running headers and footers.

    Blocks: ``("chapter", text)`` — a large bold heading that starts a new page and becomes the
    running header's right part; ``("article", text)`` — a bold line at body size (as "Стаття N."
    headings usually are); ``("para", text)`` — a paragraph; ``("table", rows)`` — a ruled table
    (first row = header, repeated after a page break). ``header`` (e.g. a short title) is printed
    at the top of every page, followed by " · " and the current chapter.
    """
    doc = pymupdf.open()
    lay = _Layout(doc)
    _title(lay, title)
    chapter_of_page: dict[int, str] = {}
    chapter = ""
    for kind, value in blocks:
        if kind == "chapter":
            if lay.y > MARGIN_T + 40:
                lay.new_page()
            chapter = value
            _heading(lay, value, "")
        elif kind == "article":
            lay.ensure(BODY_SIZE * 1.38 * 3 + 8)
            lay.space(6)
            lay.paragraph(value, bold=True, after=3)
        elif kind == "para":
            lay.paragraph(value)
        elif kind == "table":
            _table(lay, value)
        else:
            raise ValueError(f"unknown block kind {kind!r}")
        chapter_of_page[doc.page_count] = chapter  # the chapter a page ends in
    lay.flush()
    if header is not None:
        font, last = _font(False), ""
        for i, page in enumerate(doc):
            last = chapter_of_page.get(i + 1, last)
            text = f"{header} · {last}" if last else header
            tw = pymupdf.TextWriter(page.rect, color=(0.35, 0.35, 0.35))
            tw.append((MARGIN_L, MARGIN_T - 22), text, font=font, fontsize=FOOTER_SIZE)
            tw.write_text(page)
            page.draw_line((MARGIN_L, MARGIN_T - 16), (PAGE_W - MARGIN_R, MARGIN_T - 16), color=(0.6, 0.6, 0.6),
                           width=0.5)
    if footer is not None:
        _footers(doc, footer)
    return _finish(doc, title)


# --- broken and unusual files ------------------------------------------------

_SAMPLE_TEXT = [
    ("Загальні положення",
     "Цей документ створено для перевірки обробки PDF-файлів. Ґрунтовні правила, їхній зміст "
     "і порядок застосування описано нижче; сім’я документів «Приклад» є вигаданою."),
    ("Порядок роботи",
     "Кожен користувач має право на інформацію. Об’єднання записів здійснюється щодня о 18:00."),
]


def encrypted_pdf(user_pw: str = "1234", owner_pw: str = "owner-5678") -> bytes:
    """A text PDF that needs ``user_pw`` to open (AES-256)."""
    doc = pymupdf.open("pdf", ukrainian_pdf("Захищений документ", _SAMPLE_TEXT))
    return doc.tobytes(garbage=3, deflate=True, no_new_id=True, encryption=pymupdf.PDF_ENCRYPT_AES_256,
                       user_pw=user_pw, owner_pw=owner_pw,
                       permissions=int(pymupdf.PDF_PERM_PRINT | pymupdf.PDF_PERM_COPY))


def scan_source_pdf(pages: int = 2) -> bytes:
    """The text PDF that :func:`image_only_pdf` photographs (to compare OCR with what was drawn)."""
    sections = [(f"Розділ {i + 1}. Сканована сторінка", _SAMPLE_TEXT[i % 2][1]) for i in range(pages)]
    return ukrainian_pdf("Скан документа", sections, pages_hint=pages)


def _picture_pdf(pictures: list[pymupdf.Pixmap], title: str) -> bytes:
    """One A4 page per picture, the picture filling the page: no text layer."""
    out = pymupdf.open()
    for pix in pictures:
        page = out.new_page(width=PAGE_W, height=PAGE_H)
        page.insert_image(page.rect, stream=pix.tobytes("png"))
    out.set_metadata({"title": title, "creationDate": _FIXED_DATE, "modDate": _FIXED_DATE})
    return out.tobytes(garbage=3, deflate=True, no_new_id=True)


def image_only_pdf(pages: int = 2, dpi: int = 150) -> bytes:
    """Pages that are only a grayscale raster picture of Ukrainian text (a scan at ``dpi``): no text layer."""
    src = pymupdf.open("pdf", scan_source_pdf(pages))
    return _picture_pdf([src[i].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY) for i in range(pages)],
                        "Скан документа")


def blank_scan_pdf() -> bytes:
    """A scanned page whose picture holds no text at all: a smooth grey gradient."""
    w, h = 620, 877
    samples = bytes(200 + (x + y) * 50 // (w + h) for y in range(h) for x in range(w))
    return _picture_pdf([pymupdf.Pixmap(pymupdf.csGRAY, w, h, samples, False)], "Порожній скан")


def corrupt_pdf() -> bytes:
    """Starts like a PDF, then garbage: no objects, no xref. PyMuPDF refuses to open it."""
    good = ukrainian_pdf("Пошкоджений документ", _SAMPLE_TEXT)
    rng = random.Random(1234)
    garbage = bytes(rng.randrange(256) for _ in range(4000)).replace(b"obj", b"xxx").replace(b"endstream", b"")
    return good[:9] + garbage + b"\n%%EOF\n"


def not_a_pdf() -> bytes:
    """Plain UTF-8 text, e.g. something uploaded with a .pdf name by mistake."""
    return ("Це не PDF, а звичайний текстовий файл.\n"
            "Список покупок: хліб, молоко, яйця, ґудзики, їжа для кота.\n").encode("utf-8")


def truncated_pdf() -> bytes:
    """A good multi-page PDF cut off halfway, as by an interrupted download."""
    good = ukrainian_pdf("Обірваний документ", _SAMPLE_TEXT * 6, pages_hint=4)
    return good[: len(good) // 2]


def write_objects(objs: Sequence[bytes]) -> bytes:
    """A PDF written by hand from its objects (object 1 is the catalog) with a correct cross-reference table."""
    out, offsets = bytearray(b"%PDF-1.7\n"), []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (i, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


def no_pages_pdf() -> bytes:
    """A well-formed PDF whose page tree is empty (PyMuPDF refuses to save one, so it is written by hand)."""
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"]
    return write_objects(objs)


def _text_page(doc: pymupdf.Document, lines: Sequence[str], width: float = PAGE_W, height: float = PAGE_H,
               size: float = BODY_SIZE) -> pymupdf.Page:
    page = doc.new_page(width=width, height=height)
    tw = pymupdf.TextWriter(page.rect)
    for k, line in enumerate(lines):
        tw.append((MARGIN_L, MARGIN_T + (k + 1) * size * 1.5), line, font=_font(False), fontsize=size)
    tw.write_text(page)
    return page


def many_pages_pdf(n: int) -> bytes:
    """``n`` cheap pages, one short line each; page i says "Сторінка i: ..." with words unique to it."""
    doc = pymupdf.open()
    for i in range(1, n + 1):
        _text_page(doc, [many_pages_line(i)])
    return _finish(doc, f"{n} сторінок")


_TALLY = ["яблуко", "груша", "слива", "вишня", "ожина", "малина", "калина", "горіх", "дуб", "клен",
          "ясен", "береза", "вільха", "липа", "тополя", "верба", "сосна", "ялина", "модрина", "каштан"]


def many_pages_line(i: int) -> str:
    """The line on page ``i`` of :func:`many_pages_pdf`: its words (not only its digits) are unique to the page."""
    return f"Сторінка {i}: " + " ".join(_TALLY[i // 20 ** k % 20] for k in range(3)) + "."


ODD_SIZES = [(14400.0, 14400.0), (1.0, 1.0), (200000.0, 200000.0)]


def odd_sizes_pdf() -> bytes:
    """Pages of absurd size: 14400 pt square with text, then 1x1 pt and 200000 pt square, each only a picture."""
    doc = pymupdf.open()
    _text_page(doc, ["Величезна сторінка з текстом про розміри аркуша."], *ODD_SIZES[0], size=200)
    picture = pymupdf.Pixmap(pymupdf.csGRAY, 64, 64, bytes(range(64)) * 64, False).tobytes("png")
    for w, h in ODD_SIZES[1:]:
        doc.new_page(width=w, height=h).insert_image(pymupdf.Rect(0, 0, w, h), stream=picture)
    return _finish(doc, "Дивні розміри")


def scripted_pdf() -> bytes:
    """A text page with JavaScript (an /OpenAction and a link) and two attached files."""
    doc = pymupdf.open("pdf", ukrainian_pdf("Документ зі скриптами", _SAMPLE_TEXT))
    js = doc.get_new_xref()
    doc.update_object(js, "<< /S /JavaScript /JS (app.alert('opened'); this.exportDataObject({cName: 'run.exe'});) >>")
    doc.xref_set_key(doc.pdf_catalog(), "OpenAction", f"{js} 0 R")
    page = doc[0]
    page.insert_link({"kind": pymupdf.LINK_URI, "from": pymupdf.Rect(60, 60, 300, 90), "uri": "https://example.com"})
    doc.xref_set_key(page.annot_xrefs()[0][0], "A", "<< /S /JavaScript /JS (app.alert('clicked');) >>")
    doc.embfile_add("run.exe", b"MZ\x90\x00 not really a program", filename="run.exe")
    doc.embfile_add("notes.txt", "Прихований текст вкладення, який не можна індексувати.".encode(), filename="notes.txt")
    return doc.tobytes(garbage=3, deflate=True, no_new_id=True)


MARKUP_LINES = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
                "**bold** [link](javascript:alert(1))", "# not a heading & <b>not bold</b>"]


def markup_text_pdf() -> bytes:
    """Ordinary text that looks like HTML, Markdown and script, between two sentences."""
    doc = pymupdf.open()
    _text_page(doc, ["Цей рядок звичайний і стоїть перед розміткою.", *MARKUP_LINES,
                     "Цей рядок звичайний і стоїть після розмітки."])
    return _finish(doc, "Розмітка як текст")


BOMB_TEXT = "Decompression bomb page"


@lru_cache(maxsize=4)
def _deflated_repeat(head: bytes, unit: bytes, size: int) -> bytes:
    """zlib data inflating to ``head`` then ``unit`` repeated to ``size`` bytes (about 1,000:1)."""
    c = zlib.compressobj(9)
    block = unit * ((1 << 20) // len(unit))
    out = [c.compress(head)] + [c.compress(block) for _ in range(size // len(block))]
    return b"".join(out) + c.flush()


def bomb_pdf(pages: int = 1, inflated_mb: int = 300) -> bytes:
    """A decompression bomb: every page draws one line of text, then ``inflated_mb`` MB of idle drawing
    instructions ("q 1 0 0 1 0 0 cm Q", repeated) held in ~0.1% of that as a Flate stream shared by the pages.
    Written by hand (PyMuPDF would recompress the stream)."""
    head = f"BT /F1 24 Tf 72 720 Td ({BOMB_TEXT}) Tj ET\n".encode()
    stream = _deflated_repeat(head, b"q 1 0 0 1 0 0 cm Q\n", inflated_mb << 20)
    kids = " ".join(f"{5 + i} 0 R" for i in range(pages))
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream)]
    objs += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> "
             b"/Contents 4 0 R >>"] * pages
    return write_objects(objs)


def page_of(pdf: bytes, phrase: str) -> int:
    """The one page (1-based) of ``pdf`` whose text holds ``phrase`` (white space folded)."""
    doc = pymupdf.open(stream=pdf, filetype="pdf")
    hits = [i + 1 for i in range(doc.page_count) if phrase in " ".join(doc[i].get_text().split())]
    assert len(hits) == 1, f"{phrase!r} on pages {hits}"
    return hits[0]
