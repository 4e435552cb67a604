"""A page's drawing instructions counted from their raw streams, inflation stopped at the limit."""
from __future__ import annotations

import zlib

import pymupdf

from pipeline.documents.page_budget import heavy_page, inflated_size, page_streams, stream_size

MB = 2**20


def test_inflation_stops_at_the_limit_and_a_broken_stream_counts_what_it_gave():
    raw = zlib.compress(b"0 0 m 1 1 l S\n" * (8 * MB // 14))
    assert inflated_size(raw, 10 * MB) == len(zlib.decompress(raw))
    assert inflated_size(raw, MB) == MB + 1
    assert inflated_size(raw[: len(raw) // 2], 10 * MB) > 0  # truncated: what it inflated before the cut
    assert inflated_size(b"not zlib at all", MB) == len(b"not zlib at all")


def test_contents_and_form_xobjects_are_counted(pdfgen, manual_pdf):
    doc = pymupdf.open("pdf", manual_pdf)
    assert heavy_page(doc, MB) is None
    assert all(0 < sum(stream_size(doc, x, MB) for x in page_streams(doc, p)) < 100_000 for p in range(doc.page_count))
    bomb = pymupdf.open("pdf", pdfgen.bomb_pdf(inflated_mb=3))
    assert heavy_page(bomb, 2 * MB) == 1 and heavy_page(bomb, 4 * MB) is None
    # the same page drawn inside another page: its instructions arrive as a Form XObject
    host = pymupdf.open("pdf", manual_pdf)
    host[2].show_pdf_page(host[2].rect, bomb, 0)
    assert heavy_page(host, 2 * MB) == 3
    checked = []
    assert heavy_page(host, 4 * MB, check=lambda: checked.append(1)) is None and len(checked) == host.page_count
