"""Evidence rendering on real PDFs built here, parsed by the real ingest stage."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pymupdf
import pytest

from pipeline.documents.ingest import parse_pdf
from pipeline.documents.render import (chunk_boxes, chunk_word_indices, evidence_image, merge_line_boxes,
                             render_page)
from pipeline.types import Chunk

TITLE = "Інструкція для медичного застосування"
P1_LINES = ["Препарат застосовують для лікування головного болю.",
            "Дозування встановлює лікар індивідуально для кожного пацієнта.",
            "Таблетки слід приймати після їди, запиваючи"]  # the sentence goes on on page 2
P2_LINES = ["достатньою кількістю води, тричі на добу.",
            "Зберігати в сухому місці при температурі до 25 °C."]
ZOOM = 2.0
COLOR, ALPHA = (255, 214, 0), 0.38


def _font_buffer() -> bytes:
    # PyMuPDF's built-in Helvetica (Nimbus Sans) has Cyrillic glyphs once embedded
    # as a font file; fontname="helv" alone would use WinAnsi and lose them.
    return pymupdf.Font("helv").buffer


def _write_lines(page: pymupdf.Page, lines, x=72, y=90, size=11, step=1.5):
    page.insert_font(fontname="F0", fontbuffer=_font_buffer())
    for text in lines:
        page.insert_text((x, y), text, fontname="F0", fontsize=size)
        y += size * step


def _sample_pdf() -> bytes:
    doc = pymupdf.open()
    p1 = doc.new_page(width=595, height=842)
    p1.insert_font(fontname="F0", fontbuffer=_font_buffer())
    p1.insert_text((72, 90), TITLE, fontname="F0", fontsize=16)
    _write_lines(p1, P1_LINES, y=120)
    p2 = doc.new_page(width=595, height=842)
    _write_lines(p2, P2_LINES)
    return doc.tobytes()


class _Shelf:
    """Just the two calls of pipeline.index.Library that rendering needs, over a parsed Document."""

    def __init__(self, doc, path: Path):
        self.doc, self.path = doc, path

    def page(self, doc_hash, number):
        return next((p for p in self.doc.pages if doc_hash == self.doc.doc_hash and p.number == number), None)

    def pdf_path(self, doc_hash):
        return self.path


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    data = _sample_pdf()
    path = tmp_path_factory.mktemp("render") / "x.pdf"
    path.write_bytes(data)
    doc = parse_pdf(data, "x.pdf")
    p1, p2 = doc.pages
    # the chunk: "Дозування ... запиваючи" on page 1 and its continuation "достатньою ... добу." on page 2
    s1 = p1.markdown.index("Дозування")
    e1 = p1.markdown.index("запиваючи") + len("запиваючи")
    s2 = p2.markdown.index("достатньою")
    e2 = p2.markdown.index("добу.") + len("добу.")
    body = p1.markdown[s1:e1] + "\n" + p2.markdown[s2:e2]
    chunk = Chunk(f"{doc.doc_hash}:1", doc.doc_hash, doc.name, 1, "", body, "", [(1, s1, e1), (2, s2, e2)])
    return doc, path, chunk


def _union(boxes):
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def _words_by_text(page, texts):
    """The entries of page.words for the given word texts, in order (each text once, left to right)."""
    out, start = [], 0
    for t in texts:
        i = next(i for i in range(start, len(page.words)) if page.words[i][4] == t)
        out.append(i)
        start = i + 1
    return out


def _pixel_rect(box, zoom):
    x0, y0, x1, y1 = (v * zoom for v in box)
    return math.floor(x0), math.floor(y0), math.ceil(x1), math.ceil(y1)  # half-open


def _highlight_mask(a: np.ndarray) -> np.ndarray:
    """Pixels tinted by the yellow marker (white or black text under it) or its orange outline."""
    r, g, b = (a[..., k].astype(int) for k in range(3))
    return (r - b >= 60) & (r >= 80)


# ---- (1) which words, which boxes ------------------------------------------------
def test_chunk_words_are_exactly_the_sentence_words(sample):
    doc, _, chunk = sample
    p1, p2 = doc.pages
    expected1 = (P1_LINES[1] + " " + P1_LINES[2]).split()
    idx1 = chunk_word_indices(p1, chunk)
    assert idx1 == sorted(idx1)
    assert [p1.words[i][4] for i in idx1] == expected1
    assert idx1 == _words_by_text(p1, expected1)
    assert [p2.words[i][4] for i in chunk_word_indices(p2, chunk)] == P2_LINES[0].split()


def test_boxes_are_the_word_boxes_merged_per_line(sample):
    doc, _, chunk = sample
    p1, p2 = doc.pages
    line_a = _words_by_text(p1, P1_LINES[1].split())
    line_b = _words_by_text(p1, P1_LINES[2].split())
    # raw: exactly the PDF word boxes, in reading order
    assert chunk_boxes(p1, chunk, merge=False) == [tuple(p1.words[i][:4]) for i in line_a + line_b]
    # merged: one marker stroke per line, each the union of that line's real word boxes
    assert chunk_boxes(p1, chunk) == [_union([p1.words[i][:4] for i in line_a]),
                                      _union([p1.words[i][:4] for i in line_b])]
    line_c = _words_by_text(p2, P2_LINES[0].split())
    assert chunk_boxes(p2, chunk) == [_union([p2.words[i][:4] for i in line_c])]
    # the title and the first sentence are not covered
    title_box = p1.words[0][:4]
    assert all(b[3] <= title_box[1] or b[1] >= title_box[3] for b in chunk_boxes(p1, chunk))


def test_merge_keeps_far_words_and_other_lines_apart():
    a, b = (10, 10, 40, 22), (43, 10, 70, 22)          # same line, a space apart -> one stroke
    far = (300, 10, 330, 22)                             # same line, another column -> its own
    below = (10, 30, 40, 42)                             # next line
    assert merge_line_boxes([a, b, far, below]) == [(10, 10, 70, 22), far, below]
    assert merge_line_boxes([(5, 5, 5, 9), a]) == [a]   # empty boxes are dropped


# ---- (2) a chunk across two pages ---------------------------------------------------
def test_chunk_across_pages_has_boxes_on_both(sample):
    doc, _, chunk = sample
    p1, p2 = doc.pages
    assert chunk.pages == [1, 2]
    assert chunk_boxes(p1, chunk) and chunk_boxes(p2, chunk)
    only_p2 = Chunk("c", doc.doc_hash, doc.name, 2, "", "", "", [chunk.spans[1]])
    assert chunk_word_indices(p1, only_p2) == [] and chunk_boxes(p1, only_p2) == []


# ---- (3) the highlight in the pixels -------------------------------------------------
def test_highlight_pixels_are_where_the_words_are(sample):
    doc, path, chunk = sample
    p1 = doc.pages[0]
    boxes = chunk_boxes(p1, chunk)
    plain = np.asarray(render_page(path, 1, zoom=ZOOM))
    img = render_page(path, 1, boxes, zoom=ZOOM)
    assert img.mode == "RGB" and img.size == (math.ceil(595 * ZOOM), math.ceil(842 * ZOOM))
    a = np.asarray(img)
    inside = np.zeros(a.shape[:2], bool)
    for box in boxes:
        x0, y0, x1, y1 = _pixel_rect(box, ZOOM)
        inside[y0:y1, x0:x1] = True
        # the whole box area is marked: interior white paper turned marker-yellow
        region = a[y0 + 3:y1 - 3, x0 + 3:x1 - 3]
        assert _highlight_mask(region).mean() > 0.95
    # nothing outside the boxes changed, pixel for pixel, and no marker colour there
    changed = (a != plain).any(axis=2)
    assert changed[inside].mean() > 0.95
    assert not changed[~inside].any()
    assert not _highlight_mask(a)[~inside].any()
    # far away (page 2's sentence position is empty here; the lower half is blank): pure white
    assert (a[a.shape[0] // 2:] == 255).all()
    # white paper under the marker is the alpha blend of white and the marker colour
    x0, y0, x1, y1 = _pixel_rect(boxes[0], ZOOM)
    white = (plain[y0:y1, x0:x1] == 255).all(axis=2)
    blend = np.round(255 * (1 - ALPHA) + np.array(COLOR) * ALPHA)
    got = a[y0:y1, x0:x1][white]
    interior = got[len(got) // 4: 3 * len(got) // 4]  # skip outline rows
    assert np.abs(np.median(interior, axis=0) - blend).max() <= 2


def test_boxes_follow_rotation_and_cropbox(tmp_path):
    doc = pymupdf.open()
    p = doc.new_page(width=400, height=600)
    p.insert_text((50, 100), "ROTATED", fontname="helv", fontsize=20)
    p.set_rotation(90)
    p = doc.new_page(width=400, height=600)
    p.insert_text((150, 300), "CROPPED", fontname="helv", fontsize=20)
    p.set_cropbox(pymupdf.Rect(100, 200, 400, 600))
    path = tmp_path / "rot.pdf"
    doc.save(path)
    with pymupdf.open(path) as d:
        words = [d[i].get_text("words") for i in range(2)]
    rot_box, crop_box = words[0][0][:4], words[1][0][:4]
    x0, y0, x1, y1 = rot_box
    # /Rotate 90 turns the 400x600 page into 600x400: unrotated (x, y) shows at (600 - y, x)
    expected = {1: (600 - y1, x0, 600 - y0, x1), 2: crop_box}  # words are crop-box-relative already
    for n, box in ((1, rot_box), (2, crop_box)):
        plain = np.asarray(render_page(path, n, zoom=1.0))
        a = np.asarray(render_page(path, n, [box], zoom=1.0, outline=None))
        ink = (plain < 128).all(axis=2)
        changed = (a != plain).any(axis=2)
        assert ink.any() and changed[ink].all()  # every ink pixel of the word is marked
        ys, xs = np.nonzero(changed)
        assert (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1) == _pixel_rect(expected[n], 1.0)
    assert render_page(path, 1, zoom=1.0).size == (600, 400)  # rendered as shown, rotated


# ---- (4) bad page numbers ---------------------------------------------------------------
@pytest.mark.parametrize("n", [0, -1, 3, 99])
def test_page_out_of_range(sample, n):
    _, path, _ = sample
    with pytest.raises(ValueError, match="out of range"):
        render_page(path, n)


def test_missing_pdf_and_bad_zoom(sample, tmp_path):
    _, path, _ = sample
    with pytest.raises(FileNotFoundError):
        render_page(tmp_path / "nope.pdf", 1)
    with pytest.raises(ValueError):
        render_page(path, 1, zoom=0)


# ---- (5) absurd page sizes ---------------------------------------------------------------
def test_huge_page_fits_max_side_and_boxes_still_land(tmp_path):
    doc = pymupdf.open()
    p = doc.new_page(width=30000, height=4000)
    p.insert_text((20000, 2000), "BIG", fontname="helv", fontsize=400)
    doc.new_page(width=3, height=2)  # and a tiny one
    path = tmp_path / "big.pdf"
    doc.save(path)
    with pymupdf.open(path) as d:
        box = d[0].get_text("words")[0][:4]
    img = render_page(path, 1, [box], max_side=1000, outline=None)
    assert max(img.size) <= 1000 and img.width >= 999
    a, plain = np.asarray(img), np.asarray(render_page(path, 1, max_side=1000))
    changed = (a != plain).any(axis=2)
    scale = img.width / 30000
    x0, y0, x1, y1 = _pixel_rect(box, scale)
    ys, xs = np.nonzero(changed)
    assert abs(xs.min() - x0) <= 1 and abs(xs.max() + 1 - x1) <= 1
    assert abs(ys.min() - y0) <= 1 and abs(ys.max() + 1 - y1) <= 1
    tiny = render_page(path, 2, zoom=1.5)
    assert 1 <= min(tiny.size) and max(tiny.size) <= 5


# ---- convenience -----------------------------------------------------------------------------
def test_evidence_image(sample):
    doc, path, chunk = sample
    shelf = _Shelf(doc, path)
    first = evidence_image(shelf, chunk, zoom=1.0)
    assert np.array_equal(np.asarray(first), np.asarray(render_page(path, 1, chunk_boxes(doc.pages[0], chunk), zoom=1.0)))
    second = np.asarray(evidence_image(shelf, chunk, 2, zoom=1.0))
    assert _highlight_mask(second).any()
    with pytest.raises(ValueError):
        evidence_image(shelf, chunk, 5)

