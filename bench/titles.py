"""Document titles over real PDFs: which metadata titles are kept, which give way to the first heading.

    python -m bench.titles assets/sample ../shared/unlp/pdfs ../shared/unlp-long/pdfs

Prints one line per PDF (its metadata title, whether it is usable and the document's own —
``pipeline.documents.titles.belongs`` on the words shown — and the title chosen) and writes
bench/titles.md with the date, machine and command. Only the first two pages are parsed (the title is
looked for there).
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from pathlib import Path

import pymupdf

from pipeline.documents import titles as T
from pipeline.documents.ingest import parse_pdf


def first_pages(data: bytes, n: int = 2) -> bytes:
    """The PDF's first ``n`` pages with its metadata (what the title is chosen from)."""
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        part = pymupdf.open()
        part.insert_pdf(doc, from_page=0, to_page=min(n, doc.page_count) - 1)
        part.set_metadata({k: v for k, v in (doc.metadata or {}).items() if k not in ("format", "encryption")})
        return part.tobytes()


def row(f: Path, folder: str) -> dict:
    data = f.read_bytes()
    parsed = parse_pdf(first_pages(data), f.name)
    meta = T.clean(T._metadata_title(data))
    usable = T.usable(meta, f.name)
    own = usable and T.belongs(T.shorten(meta), [p.markdown for p in parsed.pages])
    return {"file": f"{folder}/{f.name}", "metadata": meta, "usable": usable, "kept": own,
            "title": parsed.title}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--out", default="bench/titles.md")
    a = ap.parse_args(argv)
    rows = [row(f, Path(d).as_posix()) for d in a.dirs for f in sorted(Path(d).glob("*.pdf"))]
    lines = [f"# Document titles — {datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores", "",
             f"Command: `python -m bench.titles {' '.join(a.dirs)}`", "",
             f"{len(rows)} PDFs; {sum(r['usable'] for r in rows)} with a usable metadata title, "
             f"{sum(r['kept'] for r in rows)} of them kept as the document's own, "
             f"{sum(r['usable'] and not r['kept'] for r in rows)} replaced by the first heading.", "",
             "| file | metadata title | kept | title shown |", "|---|---|---|---|"]
    for r in rows:
        cut = lambda s: (s[:60] + "…" if len(s) > 60 else s).replace("|", "/")  # noqa: E731
        lines.append(f"| {r['file'][:40]} | {cut(r['metadata'])} | {'yes' if r['kept'] else 'no'} | {cut(r['title'])} |")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    Path(a.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
