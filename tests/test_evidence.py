"""Readable evidence on real PDFs built here, parsed by the real ingest stage; checked in the pixels."""
from __future__ import annotations

import math

import numpy as np
import pymupdf
import pytest

from pipeline.documents.evidence import (DISPLAY_WIDTH, MAX_DISPLAY_HEIGHT, MIN_SCALE, chunk_lines, crop_rect, evidence_for,
                                         evidence_views, score_lines, strongest, whole_lines, why_this_answer)
from pipeline.documents.ingest import _align, parse_pdf
from pipeline.types import Chunk, Page

TITLE = "Спосіб застосування та дози"
LINES = ["Препарат призначають дорослим і дітям старше 12 років.",
         "Таблетки приймають після їди, запиваючи склянкою води.",
         "Добова доза становить не більше чотирьох таблеток.",
         "Інтервал між прийомами має бути не менше шести годин.",
         "Курс лікування триває від трьох до п'яти днів.",
         "Дітям молодшого віку препарат не призначають.",
         "Зберігати при температурі не вище 25 °C."]
QUESTION = "Як слід приймати таблетки препарату?"
OPTIONS = {"A": "після їди, запиваючи водою", "B": "не більше чотирьох таблеток на добу", "C": "натщесерце"}


def _pdf(lines, title=TITLE, size=11.0, width=595, height=842) -> bytes:
    doc = pymupdf.open()
    page = doc.new_page(width=width, height=height)
    page.insert_font(fontname="F0", fontbuffer=pymupdf.Font("helv").buffer)
    page.insert_text((72, 80), title, fontname="F0", fontsize=16)
    for k, text in enumerate(lines):
        page.insert_text((72, 110 + k * size * 1.5), text, fontname="F0", fontsize=size)
    return doc.tobytes()


def _setup(tmp_path, lines, **kw):
    data = _pdf(lines, **kw)
    path = tmp_path / "e.pdf"
    path.write_bytes(data)
    doc = parse_pdf(data, "e.pdf")
    page = doc.pages[0]
    start, end = page.markdown.index(lines[0][:12]), page.markdown.rindex(lines[-1][-6:]) + 6
    chunk = Chunk("c", doc.doc_hash, doc.name, 0, "", page.markdown[start:end], "", [(1, start, end)])
    return path, page, chunk


class _Shelf:
    """The two calls of pipeline.index.Library that evidence needs, over one parsed page."""

    def __init__(self, page, path=None):
        self.p, self.path = page, path

    def page(self, doc_hash, number):
        return self.p if number == self.p.number else None

    def pdf_path(self, doc_hash):
        return self.path


def _strong(a):  # marker orange over paper or ink, and its outline
    r, g, b = (a[..., k].astype(int) for k in range(3))
    return r - b >= 80


def _light(a):  # the light yellow over paper or ink
    r, g, b = (a[..., k].astype(int) for k in range(3))
    return (r - b >= 30) & (r - b < 80)


def _pixels(box, crop_box, zoom, pad=0):
    x0, y0 = math.floor(crop_box[0] * zoom), math.floor(crop_box[1] * zoom)
    return (math.floor(box[0] * zoom) - x0 - pad, math.floor(box[1] * zoom) - y0 - pad,
            math.ceil(box[2] * zoom) - x0 + pad, math.ceil(box[3] * zoom) - y0 + pad)


def test_lines_are_the_chunk_lines_with_their_text(tmp_path):
    _, page, chunk = _setup(tmp_path, LINES)
    lines = chunk_lines(page, chunk)
    assert [ln.text for ln in lines] == LINES  # the title is not in the chunk
    assert all(a.box[3] <= b.box[1] for a, b in zip(lines, lines[1:]))  # top to bottom, one box per line


def supporting_lines(page, chunk, question, option_text, k=2):
    return strongest(score_lines(chunk_lines(page, chunk), question, option_text, "lemma"), k)


def test_supporting_lines_favour_the_options_own_words(tmp_path):
    _, page, chunk = _setup(tmp_path, LINES)
    a = supporting_lines(page, chunk, QUESTION, OPTIONS["A"])
    b = supporting_lines(page, chunk, QUESTION, OPTIONS["B"])
    assert [ln.text for ln in a] == [LINES[1]]  # "після їди, запиваючи ... води"; no other line has A's words
    assert [ln.text for ln in b] == [LINES[2]]  # "не більше чотирьох таблеток"
    assert supporting_lines(page, chunk, QUESTION, OPTIONS["C"]) == []  # nothing supports "натщесерце"
    # an option made only of question words is supported by the lines with most of them
    only_q = supporting_lines(page, chunk, QUESTION, "таблетки", k=1)
    assert [ln.text for ln in only_q] == [LINES[1]]  # "Таблетки приймають": two question words
    why = why_this_answer(_Shelf(page), [chunk], QUESTION, OPTIONS, ["A", "B"])
    assert [ln.text for ln in why["A"]] == [LINES[1]] and [ln.text for ln in why["B"]] == [LINES[2]]
    assert why["A"][0].page == 1 and why["A"][0].box == a[0].box


def test_strong_colour_marks_exactly_the_supporting_line(tmp_path):
    path, page, chunk = _setup(tmp_path, LINES)
    ev = evidence_views(path, page, chunk, QUESTION, OPTIONS["A"])
    assert [ln.text for ln in ev.strong] == [LINES[1]]
    crop = np.asarray(ev.crop)
    zoom = ev.crop.width / (ev.crop_box[2] - ev.crop_box[0])
    sx0, sy0, sx1, sy1 = _pixels(ev.strong[0].box, ev.crop_box, zoom)
    inside = np.zeros(crop.shape[:2], bool)
    inside[max(0, sy0 - 1):sy1 + 1, max(0, sx0 - 1):sx1 + 1] = True
    strong = _strong(crop)
    assert strong[~inside].sum() == 0  # no strong colour off the supporting line
    assert strong[sy0 + 3:sy1 - 3, sx0 + 3:sx1 - 3].mean() > 0.95  # and all of it is marked
    # every other line of the chunk is lightly marked, the supporting line is not
    for ln in ev.lines:
        x0, y0, x1, y1 = _pixels(ln.box, ev.crop_box, zoom)
        light = _light(crop[y0 + 3:y1 - 3, x0 + 3:x1 - 3]).mean()
        assert (light < 0.05) if ln.text == LINES[1] else (light > 0.95)
    # the whole page carries the same two levels
    whole = np.asarray(ev.page)
    assert _strong(whole).any() and _light(whole).any()
    # through a library: the same pictures
    same = evidence_for(_Shelf(page, path), chunk, QUESTION, OPTIONS["A"])
    assert np.array_equal(np.asarray(same.crop), crop) and np.array_equal(np.asarray(same.page), whole)
    with pytest.raises(ValueError, match="not in the library"):
        evidence_for(_Shelf(page, path), chunk, QUESTION, OPTIONS["A"], page_number=2)


def test_crop_is_enlarged_for_reading_and_holds_the_chunk(tmp_path):
    path, page, chunk = _setup(tmp_path, LINES)
    ev = evidence_views(path, page, chunk, QUESTION, OPTIONS["B"])
    x0, y0, x1, y1 = ev.crop_box
    scale = DISPLAY_WIDTH / (x1 - x0)  # screen pixels per PDF point when the crop is shown 700 px wide
    assert scale >= MIN_SCALE  # 11 pt text is at least ~15 px tall on screen
    assert ev.page.width * DISPLAY_WIDTH / ev.page.width / 595 < MIN_SCALE  # the whole page, fitted, is not
    for ln in ev.lines:  # every line of the chunk, with a margin, is in the crop
        assert x0 < ln.box[0] and ln.box[2] < x1 and y0 < ln.box[1] and ln.box[3] < y1
    assert abs(ev.crop.width - 1.5 * DISPLAY_WIDTH) <= 2  # rendered 1.5x for sharp text on dense screens


def test_crop_cuts_no_line_of_the_page_in_half(tmp_path):
    """Issue 48: the crop's margin above the chunk took half of the line above it (the heading here); that line
    is now left out, and the chunk's lines stay in."""
    path, page, chunk = _setup(tmp_path, LINES)
    ev = evidence_views(path, page, chunk, QUESTION, OPTIONS["B"])
    x0, y0, x1, y1 = ev.crop_box
    with pymupdf.open(path) as doc:
        lines = [ln["bbox"] for b in doc[0].get_text("dict")["blocks"] for ln in b.get("lines", ())]
    cut = [b for b in lines if b[0] < x1 and b[2] > x0 and (b[1] < y0 < b[3] or b[1] < y1 < b[3])]
    assert not cut, (ev.crop_box, cut)
    assert all(y0 <= ln.box[1] and ln.box[3] <= y1 for ln in ev.lines)
    # the rule alone: an edge inside a line moves off it, but never into what must stay in view
    assert whole_lines((0, 50, 100, 200), [(0, 40, 90, 60), (0, 190, 90, 210)], (0, 70, 100, 180)) == (0, 60, 100, 190)
    assert whole_lines((0, 50, 100, 200), [(0, 40, 90, 80)], (0, 70, 100, 180)) == (0, 50, 100, 200)


def test_tall_chunk_crop_centres_on_the_supporting_line(tmp_path):
    filler = [f"Рядок {i} загального опису складу препарату та його властивостей." for i in range(40)]
    lines = filler[:30] + ["Таблетки приймають після їди, запиваючи склянкою води."] + filler[30:]
    path, page, chunk = _setup(tmp_path, lines, size=10.0)
    ev = evidence_views(path, page, chunk, QUESTION, OPTIONS["A"])
    x0, y0, x1, y1 = ev.crop_box
    scale = DISPLAY_WIDTH / (x1 - x0)
    assert (y1 - y0) * scale <= MAX_DISPLAY_HEIGHT + 1  # fits the screen height
    s = ev.strong[0].box
    assert y0 < s[1] and s[3] < y1  # the supporting line is in view...
    assert ev.lines[0].box[1] < y0  # ...and the chunk's first line, far above, is not
    assert _strong(np.asarray(ev.crop)).any()


def test_crop_rect_geometry():
    # a line across a wide landscape page: the crop is no wider than readable, centred on the focus
    box = crop_rect(1400, 600, [(50, 100, 1350, 112)], [(900, 100, 1000, 112)])
    assert box[2] - box[0] == pytest.approx(DISPLAY_WIDTH / MIN_SCALE)
    assert box[0] < 900 and 1000 < box[2]
    # one short word is not blown up beyond 2.5x; the crop stays inside the page
    box = crop_rect(595, 842, [(5, 830, 40, 840)])
    assert box[2] - box[0] == pytest.approx(DISPLAY_WIDTH / 2.5)
    assert box[0] >= 0 and box[3] <= 842
    # no boxes: the whole (small) page
    assert crop_rect(200, 100, []) == (0.0, 0.0, 200, 100)
    # supporting lines across an A4 page (wider than the readable width): shown whole, ends included
    lines = [(40, 300 + 14 * i, 560, 312 + 14 * i) for i in range(6)]
    box = crop_rect(595, 842, lines, lines[2:4])
    assert box[0] <= 40 - 10 and 560 + 10 <= box[2] <= 595, box


def test_rotated_page_crop_follows_the_displayed_page(tmp_path):
    data = _pdf(LINES)
    doc = pymupdf.open("pdf", data)
    doc[0].set_rotation(90)
    path = tmp_path / "r.pdf"
    path.write_bytes(doc.tobytes())
    # (pymupdf4llm's fast mode reads no text from a /Rotate 90 page, so the page is built from its words here)
    words = [tuple(w[:5]) for w in doc[0].get_text("words", sort=True)]
    md = "\n".join(LINES)
    page = Page(1, 595, 842, md, words, _align(md, words))
    chunk = Chunk("c", "h", "r.pdf", 0, "", md, "", [(1, 0, len(md))])
    ev = evidence_views(path, page, chunk, QUESTION, OPTIONS["A"])
    assert ev.page.width > ev.page.height  # shown turned: 842 x 595
    x0, y0, x1, y1 = ev.crop_box
    assert 0 <= x0 < x1 <= 842 and 0 <= y0 < y1 <= 595
    # turned, the lines stand upright, side by side: the crop takes the strong line's column from its top
    # (a line taller than the screen shows its start), and the strong colour is drawn there
    r = pymupdf.Rect(*ev.strong[0].box) * doc[0].rotation_matrix
    assert x0 <= r.x0 and r.x1 <= x1 and y0 == pytest.approx(r.y0 - 20)
    assert _strong(np.asarray(ev.crop)).mean() > 0.01
