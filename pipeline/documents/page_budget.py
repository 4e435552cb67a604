"""Bounded work per page: how much drawing instruction a page holds once decompressed, counted with a cap.

A few hundred KB of PDF can inflate to hundreds of MB of content stream (a
decompression bomb); MuPDF then interprets every byte of it (36 s for one
300 MB page here) and nothing can interrupt it inside a page. Before parsing,
each page's content streams and the Form XObjects it draws are inflated from
their raw bytes with zlib bounded to the limit, so a bomb is recognised after
inflating at most the limit, at its first heavy page, whatever its size.

Flate (one or more in a row) and unfiltered streams are counted this way; a
stream with any other filter (LZW, ASCII85, RunLength: rare in content
streams, and at most ~2,700:1) is counted from MuPDF's own decoding.
Images are not counted: they are not interpreted, and the OCR picture of a
page is capped in pixels (``ingest.OCR_MAX_PIXELS``).
"""
from __future__ import annotations

import re
import zlib
from collections.abc import Callable

import pymupdf

_REF = re.compile(r"(\d+)\s+\d+\s+R")
_FILTER = re.compile(r"/(\w+)")
_FLATE = {"FlateDecode", "Fl"}
_STEP = 1 << 20  # inflate at most 1 MB per call: memory stays flat


def inflated_size(raw: bytes, limit: int) -> int:
    """Bytes ``raw`` (zlib data) inflates to, counted up to ``limit + 1``; a broken stream counts what it gave."""
    d = zlib.decompressobj()
    n, data = 0, raw
    try:
        while n <= limit and not d.eof:
            out = d.decompress(data, min(_STEP, limit + 1 - n))
            n += len(out)
            data = d.unconsumed_tail
            if not out and not data:
                break
    except zlib.error:
        return n or len(raw)
    return n


def stream_size(doc: pymupdf.Document, xref: int, limit: int) -> int:
    """Decoded size of stream ``xref``, counted up to ``limit + 1`` where it is Flate or unfiltered."""
    if not doc.xref_is_stream(xref):
        return 0
    kind, value = doc.xref_get_key(xref, "Filter")
    filters = _FILTER.findall(value) if kind != "null" else []
    if not set(filters) <= _FLATE:
        return len(doc.xref_stream(xref) or b"")
    data = doc.xref_stream_raw(xref) or b""
    for k in range(len(filters)):
        if k < len(filters) - 1:  # an inner layer: inflate it (bounded) to feed the next
            d = zlib.decompressobj()
            try:
                data = d.decompress(data, limit + 1)
            except zlib.error:
                return len(data)
        else:
            return inflated_size(data, limit)
    return len(data)


def page_streams(doc: pymupdf.Document, pno: int) -> list[int]:
    """The xrefs of page ``pno``'s content streams and of the Form XObjects it uses (each once)."""
    kind, value = doc.xref_get_key(doc.page_xref(pno), "Contents")
    xrefs = [int(x) for x in _REF.findall(value)] if kind in ("xref", "array") else []
    for x in doc.get_page_xobjects(pno):
        if x[0] not in xrefs:
            xrefs.append(x[0])
    return xrefs


def heavy_page(doc: pymupdf.Document, limit: int, check: Callable[[], None] | None = None) -> int | None:
    """The number (from 1) of the first page whose drawing instructions inflate to over ``limit`` bytes, or None.

    ``check`` (e.g. a deadline's) is called before each page.
    """
    for pno in range(doc.page_count):
        if check:
            check()
        total = 0
        try:
            for xref in page_streams(doc, pno):
                total += stream_size(doc, xref, limit - total)
                if total > limit:
                    return pno + 1
        except (RuntimeError, ValueError):  # a broken page: the parser reports it in its own words
            continue
    return None
