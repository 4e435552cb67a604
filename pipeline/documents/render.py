"""Evidence pictures — a chunk drawn on its PDF page like a marker pen.

Every character of a page's Markdown knows the PDF word it came from
(``Page.word_at``), so a chunk's highlight is just the boxes of its words:
no fuzzy matching at display time. Boxes are in the coordinates PyMuPDF's
``get_text("words")`` uses — PDF points, relative to the top-left of the
page's crop box, *before* the page's /Rotate is applied. :func:`render_page`
maps them onto the rendered (rotated) pixmap with ``page.rotation_matrix``
and the zoom matrix, so they land exactly on the words.

Only PyMuPDF and Pillow are used here (no UI code).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import pymupdf
from PIL import Image, ImageDraw

from ..types import Box, Chunk, Page

_WHITE = (255, 255, 255)


# ---- which words a chunk covers --------------------------------------------
def chunk_word_indices(page: Page, chunk: Chunk) -> list[int]:
    """Sorted indices into ``page.words`` of the words the chunk covers on this page.

    Empty when the chunk has no span on ``page.number``. Spans are clipped to
    the page's Markdown, so a stale or malformed span cannot raise.
    """
    n_md, n_words = len(page.word_at), len(page.words)
    found: set[int] = set()
    for number, start, end in chunk.spans:
        if number != page.number:
            continue
        start, end = max(0, int(start)), min(n_md, int(end))
        for w in page.word_at[start:end]:
            if 0 <= w < n_words:
                found.add(w)
    return sorted(found)


def _same_line(a: Sequence[float], b: Sequence[float], min_overlap: float) -> bool:
    """Whether two boxes share most of their height (are on one text line)."""
    overlap = min(a[3], b[3]) - max(a[1], b[1])
    h = min(a[3] - a[1], b[3] - b[1])
    return h > 0 and overlap >= min_overlap * h


def line_groups(boxes: Sequence[Sequence[float]], *, max_gap: float = 0.8,
                min_overlap: float = 0.5) -> list[list[int]]:
    """Group word boxes, taken in reading order, into runs on one text line: lists of indices into ``boxes``.

    The next box joins the current run when it is on the same line (their
    y-ranges overlap by at least ``min_overlap`` of the smaller height) and
    starts right of the previous box with a gap of at most ``max_gap`` × the
    line height (a slight overlap, as with tight kerning, is allowed). Empty or
    non-finite boxes are left out.
    """
    out: list[list[int]] = []
    last: Sequence[float] | None = None  # the previous word box (not the union)
    for i, b in enumerate(boxes):
        x0, y0, x1, y1 = (float(v) for v in b[:4])
        if not (x1 > x0 and y1 > y0) or not all(math.isfinite(v) for v in (x0, y0, x1, y1)):
            continue
        box = (x0, y0, x1, y1)
        if out and last is not None and _same_line(last, box, min_overlap):
            h = max(last[3] - last[1], y1 - y0)
            if -0.25 * h <= x0 - last[2] <= max_gap * h:
                out[-1].append(i)
                last = box
                continue
        out.append([i])
        last = box
    return out


def union_box(boxes: Iterable[Sequence[float]]) -> Box:
    """The smallest rectangle holding all ``boxes`` (at least one)."""
    bs = [tuple(float(v) for v in b[:4]) for b in boxes]
    return (min(b[0] for b in bs), min(b[1] for b in bs), max(b[2] for b in bs), max(b[3] for b in bs))


def merge_line_boxes(boxes: Iterable[Sequence[float]], *, max_gap: float = 0.8,
                     min_overlap: float = 0.5) -> list[Box]:
    """Merge word boxes, taken in reading order, into one rectangle per run on a line (:func:`line_groups`).

    Every rectangle returned is the exact union of the word boxes merged into it.
    """
    boxes = list(boxes)
    return [union_box(boxes[i] for i in g) for g in line_groups(boxes, max_gap=max_gap, min_overlap=min_overlap)]


def chunk_boxes(page: Page, chunk: Chunk, *, merge: bool = True) -> list[Box]:
    """The boxes (PDF points) of the chunk's words on ``page``, merged per text line.

    With ``merge=False`` the raw word boxes are returned, one per word, in
    reading order.
    """
    boxes = [tuple(float(v) for v in page.words[i][:4]) for i in chunk_word_indices(page, chunk)]
    return merge_line_boxes(boxes) if merge else boxes  # type: ignore[return-value]


# ---- rendering -----------------------------------------------------------
def _rgb(c: Sequence[int]) -> tuple[int, int, int]:
    r, g, b = (max(0, min(255, int(v))) for v in tuple(c)[:3])
    return r, g, b


def page_zoom(rect: pymupdf.Rect, zoom: float, max_side: int) -> float:
    """``zoom``, lowered so the rendered page's longest side is at most ``max_side`` pixels."""
    if not (math.isfinite(zoom) and zoom > 0):
        raise ValueError(f"zoom must be a positive number, not {zoom!r}")
    if max_side < 1:
        raise ValueError(f"max_side must be at least 1 pixel, not {max_side!r}")
    longest = max(rect.width, rect.height)
    if not (math.isfinite(longest) and longest > 0) or rect.is_empty or rect.is_infinite:
        raise ValueError(f"the page has an unusable size ({rect.width} x {rect.height} pt)")
    z = min(float(zoom), max_side / longest)
    # pixmaps are whole pixels; shave the zoom until the rounded size fits
    for _ in range(64):
        ir = (rect * pymupdf.Matrix(z, z)).irect
        if max(ir.width, ir.height) <= max_side:
            break
        z *= 0.999
    return z


def page_box_to_pixels(page: pymupdf.Page, box: Sequence[float], zoom: float,
                       origin: tuple[int, int] = (0, 0)) -> tuple[float, float, float, float]:
    """Map a word box (unrotated, crop-box-relative PDF points) to pixmap pixel coordinates."""
    r = pymupdf.Rect(*(float(v) for v in box[:4])) * page.rotation_matrix * pymupdf.Matrix(zoom, zoom)
    return r.x0 - origin[0], r.y0 - origin[1], r.x1 - origin[0], r.y1 - origin[1]


@dataclass(frozen=True)
class Marker:
    """Boxes (PDF points, as ``Page.words``) drawn in one marker colour."""
    boxes: Sequence[Sequence[float]]
    color: Sequence[int] = (255, 214, 0)
    alpha: float = 0.38
    outline: Sequence[int] | None = (230, 140, 0)


def render_page(pdf_path: str | Path, page_number: int, boxes: Iterable[Sequence[float]] = (), *,
                zoom: float = 1.5, max_side: int = 1800, color: Sequence[int] = (255, 214, 0),
                alpha: float = 0.38, outline: Sequence[int] | None = (230, 140, 0)) -> Image.Image:
    """Render the 1-based page of a PDF, with ``boxes`` drawn as translucent marker rectangles.

    ``boxes`` are in PDF points as in ``Page.words`` (PyMuPDF word coordinates).
    The zoom is capped so the longest side of the image is at most ``max_side``.
    Returns an RGB image. Raises :class:`ValueError` for a page number out of
    range or an unusable page size, and :class:`FileNotFoundError` if the PDF
    is missing.
    """
    return render_marked(pdf_path, page_number, [Marker(list(boxes), color, alpha, outline)],
                         zoom=zoom, max_side=max_side)


def render_marked(pdf_path: str | Path, page_number: int, markers: Sequence[Marker] = (), *, zoom: float = 1.5,
                  max_side: int = 1800, clip=None) -> Image.Image:
    """:func:`render_page` with several markers, drawn in order (a later one over an earlier one).

    ``clip`` (x0, y0, x1, y1 in the page's displayed points: after its /Rotate,
    as ``page.rect``) renders only that part of the page; ``zoom`` and
    ``max_side`` then apply to it.
    """
    path = Path(pdf_path)
    if not path.is_file():
        raise FileNotFoundError(f"the PDF to render is not there: {path}")
    if isinstance(page_number, bool) or not isinstance(page_number, int):
        raise ValueError(f"page number must be an integer, not {page_number!r}")
    with pymupdf.open(path) as doc:
        if not 1 <= page_number <= doc.page_count:
            raise ValueError(f"page {page_number} is out of range: {path.name} has "
                             f"{doc.page_count} page{'s' if doc.page_count != 1 else ''}")
        page = doc[page_number - 1]
        area = pymupdf.Rect(*clip) & page.rect if clip is not None else page.rect
        z = page_zoom(area, zoom, max_side)
        pix = page.get_pixmap(matrix=pymupdf.Matrix(z, z), colorspace=pymupdf.csRGB, alpha=False,
                              clip=area if clip is not None else None)
        img = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
        layers = [(m, [page_box_to_pixels(page, b, z, (pix.x, pix.y)) for b in m.boxes]) for m in markers]
    for m, rects in layers:
        img = _highlight(img, rects, m.color, max(0.0, min(1.0, float(m.alpha))), m.outline, line=max(1, round(z)))
    return img


def _highlight(img: Image.Image, rects: list[tuple[float, float, float, float]], color: Sequence[int],
               alpha: float, outline: Sequence[int] | None, line: int) -> Image.Image:
    w, h = img.size
    pixel_rects = []
    for x0, y0, x1, y1 in rects:
        if not all(math.isfinite(v) for v in (x0, y0, x1, y1)):
            continue
        # the pixels the box touches (Pillow's rectangle includes both corners)
        px0, py0 = max(0, math.floor(x0)), max(0, math.floor(y0))
        px1, py1 = min(w, math.ceil(x1)) - 1, min(h, math.ceil(y1)) - 1
        if px1 >= px0 and py1 >= py0:
            pixel_rects.append((px0, py0, px1, py1))
    if not pixel_rects:
        return img
    overlay = Image.new("RGBA", img.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    fill = (*_rgb(color), round(255 * alpha))
    for r in pixel_rects:  # fills first, so overlapping outlines are not washed over
        draw.rectangle(r, fill=fill)
    if outline is not None:
        for r in pixel_rects:
            draw.rectangle(r, outline=(*_rgb(outline), 255), width=line)
    return Image.alpha_composite(img.convert("RGBA"), overlay).convert("RGB")


def evidence_image(library, chunk: Chunk, page_number: int | None = None, **kw) -> Image.Image:
    """The chunk's page (by default its first) rendered with the chunk's words highlighted.

    ``library`` needs ``page(doc_hash, number) -> Page | None`` and
    ``pdf_path(doc_hash) -> Path`` (see :class:`pipeline.index.Library`);
    keyword arguments go to :func:`render_page`. A page the chunk does not
    reach is rendered without highlight.
    """
    page = chunk_page(library, chunk, page_number)
    return render_page(library.pdf_path(chunk.doc_hash), page.number, chunk_boxes(page, chunk), **kw)


def chunk_page(library, chunk: Chunk, page_number: int | None = None) -> Page:
    """A page of a chunk's document from the library (the chunk's first page by default)."""
    if page_number is None:
        if not chunk.spans:
            raise ValueError(f"chunk {chunk.chunk_id} has no page spans to show")
        page_number = chunk.spans[0][0]
    page = library.page(chunk.doc_hash, page_number)
    if page is None:
        raise ValueError(f"page {page_number} of {chunk.doc_name or chunk.doc_hash} is not in the library")
    return page
