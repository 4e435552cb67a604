"""Costs of the robustness paths on this machine, from one command.

    python -m bench.robustness

Prints (and writes ``bench/robustness.md``): OCR seconds per scanned A4 page
(Tesseract ukr+eng at the profile's dpi), against parsing the same page with
its text layer (same process); the time to refuse a 2,000-page PDF at the page
limit; the time to parse those 2,000 pages with the limit raised; the time
to read a 100,000-row questions CSV (UTF-8 and cp1251); and the time to refuse
a decompression bomb (``--bomb-mb`` MB of drawing instructions on a page) at the
per-page content limit, against parsing it with no limit (``--only-bomb``: only
these rows, printed).
"""
from __future__ import annotations

import argparse
import csv
import datetime
import io
import os
import platform
import time
from pathlib import Path

from pipeline.errors import IngestError, QuestionsError
from pipeline.evaluation.questions import GOLD, REQUIRED, read_questions
from pipeline.documents.ingest import parse_pdf
from pipeline.settings import load_settings
from testkit import pdfgen  # the test helpers' PDF generator (PyMuPDF only)


def timed(fn, repeat: int = 1) -> float:
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def questions_csv(n: int) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(REQUIRED + GOLD)
    for i in range(n):
        w.writerow([f"q{i}", f"Скільки коштує послуга номер {i}? Ґанок, їжак, «лапки».", "10", "20", "30", "40",
                    "50", "60", "B", "doc.pdf", 1 + i % 9])
    return out.getvalue()


def bomb_rows(s, bomb_mb: int) -> list[str]:
    limit = s.limits.max_page_content_mb
    rows = []
    for pages in (1, 40):
        data = pdfgen.bomb_pdf(pages=pages, inflated_mb=bomb_mb)

        def refuse():
            try:
                parse_pdf(data, "bomb.pdf", max_page_content_mb=limit)
            except IngestError:
                return
            raise AssertionError("the bomb was not refused")

        rows.append(f"| refuse a {len(data) / 1e6:.1f} MB PDF of {pages} page(s), each {bomb_mb} MB of drawing "
                    f"instructions decompressed, at the {limit:g} MB per-page limit | {timed(refuse, 3) * 1000:.0f} ms |")
    data = pdfgen.bomb_pdf(inflated_mb=bomb_mb)
    t = timed(lambda: parse_pdf(data, "bomb.pdf", max_page_content_mb=None))
    rows.append(f"| before the limit: parse that one page ({bomb_mb} MB) | {t:.1f} s ({bomb_mb / t:.1f} MB/s: "
                f"a page just under the {limit:g} MB limit ≈ {limit / bomb_mb * t:.0f} s) |")
    return rows


def run(pages: int, bomb_mb: int) -> str:
    s = load_settings()
    ocr_kw = dict(ocr=True, ocr_languages=s.chunking.ocr_languages, ocr_dpi=s.chunking.ocr_dpi, max_pages=s.limits.max_pages)
    scan, text = pdfgen.image_only_pdf(pages=pages), pdfgen.scan_source_pdf(pages=pages)
    doc = parse_pdf(scan, "scan.pdf", **ocr_kw)
    ocr = timed(lambda: parse_pdf(scan, "scan.pdf", **ocr_kw)) / pages
    plain = timed(lambda: parse_pdf(text, "text.pdf", **ocr_kw)) / pages
    big = pdfgen.many_pages_pdf(2000)

    def refuse():
        try:
            parse_pdf(big, "big.pdf", max_pages=s.limits.max_pages)
        except IngestError:
            return
        raise AssertionError("the 2,000-page PDF was not refused")

    refused = timed(refuse, repeat=5)
    parsed = timed(lambda: parse_pdf(big, "big.pdf", max_pages=2000, ocr=False))
    rows = questions_csv(100_000)
    utf8, cp1251 = rows.encode("utf-8"), rows.encode("cp1251")
    read_utf8 = timed(lambda: read_questions(utf8))
    read_cp1251 = timed(lambda: read_questions(cp1251))
    try:
        read_questions(utf8, max_questions=s.limits.max_questions)
        limit = "not refused"
    except QuestionsError as e:
        limit = str(e)
    lines = [f"# Robustness costs — {datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores",
             "", "Command: `python -m bench.robustness`", "",
             "| what | figure |", "|---|---|",
             f"| OCR, scanned A4 page (Tesseract {s.chunking.ocr_languages}, {s.chunking.ocr_dpi} dpi; {pages} pages) | "
             f"{ocr:.2f} s/page ({ocr / plain:.0f}× the same page with a text layer, {plain * 1000:.0f} ms) |",
             f"| OCR'd warnings | {'; '.join(doc.warnings)} |",
             f"| refuse a 2,000-page PDF at the {s.limits.max_pages}-page limit | {refused * 1000:.1f} ms |",
             f"| parse those 2,000 pages with the limit raised (no OCR) | {parsed:.1f} s |",
             f"| read 100,000 question rows, UTF-8 / cp1251 | {read_utf8:.2f} s / {read_cp1251:.2f} s |",
             f"| the same file against the {s.limits.max_questions:,}-question limit | {limit} |"] + bomb_rows(s, bomb_mb)
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=4, help="scanned pages to OCR")
    ap.add_argument("--bomb-mb", type=int, default=300, help="MB of drawing instructions on a bomb page")
    ap.add_argument("--only-bomb", action="store_true", help="only the decompression bomb rows (printed)")
    ap.add_argument("--out", type=Path, default=Path("bench/robustness.md"))
    a = ap.parse_args()
    if a.only_bomb:
        print("\n".join(bomb_rows(load_settings(), a.bomb_mb)))
        return
    text = run(a.pages, a.bomb_mb)
    a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
