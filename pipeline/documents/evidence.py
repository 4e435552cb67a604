"""Readable evidence: the lines of a chunk that support an option, and the page cropped around them.

A chunk's words on a page fall into lines (:func:`pipeline.documents.render.line_groups`).
Each line is scored by the overlap of its normalised words
(:func:`pipeline.text.normalize`) with the option's own words (weight 2) and
the question's (weight 1); the best ``k`` lines that hold at least one of the
option's own words (or, for an option made only of question words, of those)
support the option. :func:`evidence_views` draws them in a strong colour and the
rest of the chunk lightly, on the whole page and on a crop of it sized to be
read on a 1280×720 screen; :func:`why_this_answer` gives, for the chosen option
and the runner-up, their supporting lines side by side.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import pymupdf
from PIL import Image

from .render import Marker, chunk_page, chunk_word_indices, line_groups, render_marked, union_box
from ..text import normalize
from ..types import Box, Chunk, Page

LIGHT = Marker((), color=(255, 214, 0), alpha=0.22, outline=None)  # the rest of the chunk
STRONG = Marker((), color=(255, 120, 0), alpha=0.5, outline=(200, 70, 0))  # the supporting lines

# the crop: shown ~700 px wide, text at least 1.4 px per PDF point (10 pt body text ~14 px tall), at most 2.5
DISPLAY_WIDTH = 700
MIN_SCALE, MAX_SCALE = 1.4, 2.5
MAX_DISPLAY_HEIGHT = 560  # px: what fits under the answer at 1280x720
MARGIN = (14.0, 20.0)  # points around the highlighted lines (x, y)


@dataclass
class Line:
    """A run of a chunk's words on one text line of one page."""
    page: int
    text: str
    box: Box  # PDF points, as Page.words (unrotated, crop-box-relative)
    score: float = 0.0


@dataclass
class Evidence:
    crop: Image.Image  # the region around the chunk, enlarged
    page: Image.Image  # the whole page, the same highlighting
    lines: list[Line]  # the chunk's lines on this page, in reading order, scored
    strong: list[Line] = field(default_factory=list)  # the supporting lines, best first
    crop_box: tuple[float, float, float, float] = (0, 0, 0, 0)  # in displayed page points


def chunk_lines(page: Page, chunk: Chunk) -> list[Line]:
    """The chunk's words on ``page`` as lines (reading order), each with its text and box."""
    idx = chunk_word_indices(page, chunk)
    boxes = [page.words[i][:4] for i in idx]
    # a wider gap than the highlight's strokes: a dash or an unmatched word inside a line does not split it
    return [Line(page.number, " ".join(str(page.words[idx[j]][4]) for j in g), union_box(boxes[j] for j in g))
            for g in line_groups(boxes, max_gap=3.0)]


def score_lines(lines: list[Line], question: str, option: str, mode: str = "lemma") -> list[Line]:
    """Set each line's score: 2 per distinct word of the option's own (not in the question), 1 per
    distinct question word; a line needs an option word to score when the option has own words."""
    q = set(normalize(question or "", mode))
    own = set(normalize(option or "", mode)) - q
    for line in lines:
        words = set(normalize(line.text, mode))
        hits = len(words & own)
        line.score = float(2 * hits + len(words & q)) if hits or not own else 0.0
    return lines


def strongest(lines: list[Line], k: int = 2) -> list[Line]:
    """The ``k`` best-scoring lines with a score above 0, best first (ties: reading order)."""
    ranked = sorted((ln for ln in lines if ln.score > 0), key=lambda ln: -ln.score)
    return ranked[:k]


def why_this_answer(library, chunks: Sequence[Chunk], question: str, options: dict[str, str],
                    letters: Sequence[str], k: int = 2, mode: str = "lemma") -> dict[str, list[Line]]:
    """For each letter (the chosen option and the runner-up), the ``k`` evidence lines, over all pages of
    all ``chunks``, that support it most. ``library`` needs ``page(doc_hash, number)``."""
    lines: list[Line] = []
    for chunk in chunks:
        for number in dict.fromkeys(chunk.pages):
            page = library.page(chunk.doc_hash, number)
            if page is not None:
                lines += chunk_lines(page, chunk)
    out = {}
    for letter in letters:
        scored = score_lines([Line(ln.page, ln.text, ln.box) for ln in lines], question, options.get(letter, ""), mode)
        out[letter] = strongest(scored, k)
    return out


def _clamp(lo: float, size: float, limit: float) -> float:
    """Start of a span of ``size`` placed at ``lo``, moved inside [0, limit]."""
    return max(0.0, min(lo, limit - size))


def crop_rect(page_w: float, page_h: float, boxes: Sequence[Box], focus: Sequence[Box] = (), *,
              display_width: int = DISPLAY_WIDTH, min_scale: float = MIN_SCALE, max_scale: float = MAX_SCALE,
              max_display_height: int = MAX_DISPLAY_HEIGHT, margin: tuple[float, float] = MARGIN) -> Box:
    """The part of a ``page_w`` × ``page_h`` page (displayed points) to show around ``boxes``.

    Wide enough for the boxes and a margin, but no wider than ``display_width / min_scale`` (so text is
    enlarged at least ``min_scale`` on screen) unless ``focus`` is wider (the supporting lines are shown whole),
    and no narrower than ``display_width / max_scale``; as
    tall as the boxes and a margin, up to ``max_display_height`` pixels once shown. When the boxes do not
    fit, the crop is centred on ``focus`` (the supporting lines). Always inside the page.
    """
    if not boxes:
        boxes = [(0.0, 0.0, page_w, page_h)]
    region, target = union_box(boxes), union_box(focus or boxes)
    mx, my = margin
    # the supporting lines are never cut at their ends: a crop as wide as they are, when they are wider than
    # the readable width (a full-width line of an A4 page: shown a little smaller, whole)
    readable = max(display_width / min_scale, target[2] - target[0] + 2 * mx)
    width = min(page_w, max(display_width / max_scale, min(readable, region[2] - region[0] + 2 * mx)))
    fits_x = region[2] - region[0] + 2 * mx <= width
    cx = (region[0] + region[2]) / 2 if fits_x else (target[0] + target[2]) / 2
    x0 = _clamp(cx - width / 2, width, page_w)
    scale = display_width / width
    height = min(page_h, max_display_height / scale, region[3] - region[1] + 2 * my)
    if region[3] - region[1] + 2 * my <= height:
        y0 = region[1] - my
    elif target[3] - target[1] + 2 * my <= height:
        y0 = (target[1] + target[3]) / 2 - height / 2
    else:
        y0 = target[1] - my  # even the focus is taller: its top
    y0 = _clamp(y0, height, page_h)
    return (x0, y0, x0 + width, y0 + height)


def whole_lines(box: Box, lines: Sequence[Box], keep: Box) -> Box:
    """``box`` with its top and bottom edges moved off the text ``lines`` they would cut through (such a line is
    left out, so the crop shows no half-cut line), but never into ``keep`` (what must stay in view)."""
    x0, y0, x1, y1 = box
    for lx0, ly0, lx1, ly1 in sorted(lines, key=lambda b: b[1]):
        if lx1 <= x0 or lx0 >= x1:  # beside the crop
            continue
        if ly0 < y0 < ly1 and ly1 <= keep[1]:
            y0 = ly1
        if ly0 < y1 < ly1 and ly0 >= keep[3]:
            y1 = ly0
    return (x0, y0, x1, y1) if y1 > y0 else box


def _page_lines(p: pymupdf.Page) -> list[Box]:
    """Every text line of the page (displayed coordinates)."""
    return [tuple(pymupdf.Rect(*ln["bbox"]) * p.rotation_matrix) for b in p.get_text("dict")["blocks"]
            for ln in b.get("lines", ())]


def evidence_views(pdf_path: str | Path, page: Page, chunk: Chunk, question: str, option_text: str, *, k: int = 2,
                   mode: str = "lemma", display_width: int = DISPLAY_WIDTH, oversample: float = 1.5,
                   page_max_side: int = 1800) -> Evidence:
    """The chunk on ``page`` with its ``k`` lines that support ``option_text`` in a strong colour and the rest
    lightly: a crop sized for reading (``display_width`` × ``oversample`` pixels wide) and the whole page."""
    lines = score_lines(chunk_lines(page, chunk), question, option_text, mode)
    strong = strongest(lines, k)
    strong_ids = {id(ln) for ln in strong}
    markers = [replace(LIGHT, boxes=[ln.box for ln in lines if id(ln) not in strong_ids]),
               replace(STRONG, boxes=[ln.box for ln in strong])]
    whole = render_marked(pdf_path, page.number, markers, max_side=page_max_side)  # raises the clear errors
    with pymupdf.open(pdf_path) as doc:  # the crop is chosen in displayed (rotated) coordinates
        p = doc[page.number - 1]
        shown = [tuple(pymupdf.Rect(*ln.box) * p.rotation_matrix) for ln in lines]
        focus = [tuple(pymupdf.Rect(*ln.box) * p.rotation_matrix) for ln in strong]
        box = crop_rect(p.rect.width, p.rect.height, shown, focus, display_width=display_width)
        box = whole_lines(box, _page_lines(p), union_box(focus or shown)) if shown else box
    zoom = display_width * oversample / (box[2] - box[0])
    crop = render_marked(pdf_path, page.number, markers, zoom=zoom, max_side=10 * page_max_side, clip=box)
    return Evidence(crop, whole, lines, strong, box)


def evidence_for(library, chunk: Chunk, question: str, option_text: str, page_number: int | None = None,
                 **kw) -> Evidence:
    """:func:`evidence_views` for a chunk of a library (its first page by default); ``library`` needs
    ``page(doc_hash, number)`` and ``pdf_path(doc_hash)`` (see :class:`pipeline.index.Library`)."""
    page = chunk_page(library, chunk, page_number)
    return evidence_views(library.pdf_path(chunk.doc_hash), page, chunk, question, option_text, **kw)
