"""Where exact dense search stops costing nothing: exact (one matrix product) against Chroma's HNSW, by library size.

    python -m bench.vector_search [--sizes 1000 5000 20000 50000] [--dim 384] [--out bench/vector_search.md]

For each size, random unit vectors (e5-small's 384 dimensions) go into a fresh embedded Chroma through the
project's own ``VectorIndex``; it prints and writes: the first exact search after opening (it reads every
vector from Chroma), the first right after a 16-chunk batch is written (the copy is updated, not re-read), a warm exact search, and an HNSW query (``exact_search_max=0``), each the median of
``--repeat`` queries, with the share of HNSW's top 20 that the exact top 20 holds.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from pipeline.index.vectors import VectorIndex
from pipeline.settings import load_settings


def _ms(f, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), out


def measure(n: int, dim: int, repeat: int, root: Path) -> dict:
    rng = np.random.default_rng(n)
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = [f"c{i:07d}" for i in range(n)]
    queries = rng.normal(size=(repeat, dim)).astype(np.float32)
    s = load_settings("cpu")
    row = {"n": n}
    for name, limit in (("exact", n), ("hnsw", 0)):
        index = VectorIndex(root / name, s.with_(exact_search_max=limit), lambda: name, 0)
        t0 = time.perf_counter()
        for a in range(0, n, 5000):
            index.add(ids[a:a + 5000], vecs[a:a + 5000], "doc", list(range(a, min(n, a + 5000))))
        row[f"{name}_add_s"] = time.perf_counter() - t0
        if name == "exact":
            t0 = time.perf_counter()
            index.search(queries[0], 20)
            row["exact_first_ms"] = (time.perf_counter() - t0) * 1000
        it = iter(range(10 ** 9))
        row[f"{name}_ms"], _ = _ms(lambda: index.search(queries[next(it) % repeat], 20), repeat)
        if name == "exact":  # one background-embedding batch (16 chunks) written, then a question
            extra = rng.normal(size=(16, dim)).astype(np.float32)
            index.add([f"x{i:02d}" for i in range(16)], extra, "doc2", list(range(16)))
            t0 = time.perf_counter()
            index.search(queries[0], 20)
            row["exact_after_add_ms"] = (time.perf_counter() - t0) * 1000
            index.remove_document("doc2")
        row[f"{name}_top"] = [list(index.search(q, 20)) for q in queries[:5]]
        index.close()
    row["hnsw_recall"] = float(np.mean([len(set(a) & set(b)) / 20 for a, b in zip(row.pop("exact_top"),
                                                                               row.pop("hnsw_top"))]))
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000, 50000])
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("bench/vector_search.md"))
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in a.sizes:
            rows.append(measure(n, a.dim, a.repeat, Path(tmp) / str(n)))
            r = rows[-1]
            print(f"{n:>7} chunks: exact first {r['exact_first_ms']:.0f} ms, warm {r['exact_ms']:.1f} ms, "
                  f"after a 16-chunk batch {r['exact_after_add_ms']:.1f} ms; "
                  f"HNSW {r['hnsw_ms']:.1f} ms (recall@20 {r['hnsw_recall']:.2f})", flush=True)
    head = (f"# Exact dense search against HNSW, by library size — {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
            f"{platform.machine()}, {__import__('os').cpu_count()} cores\n\n"
            f"Command: `python -m bench.vector_search --sizes {' '.join(map(str, a.sizes))} --dim {a.dim} "
            f"--repeat {a.repeat}`\n\nRandom unit vectors of {a.dim} dimensions in the project's `VectorIndex` "
            "(embedded Chroma); medians of the queries, top 20.\n\n"
            "| chunks | exact: first search after opening (reads every vector) | exact: warm | exact: right after "
            "a 16-chunk batch is written | HNSW query | HNSW recall@20 of the exact top 20 (random vectors: "
            "HNSW's worst case) |\n|---|---|---|---|---|---|\n")
    body = "".join(f"| {r['n']:,} | {r['exact_first_ms']:.0f} ms | {r['exact_ms']:.1f} ms | {r['exact_after_add_ms']:.1f} ms | "
                   f"{r['hnsw_ms']:.1f} ms | "
                   f"{r['hnsw_recall']:.2f} |\n" for r in rows)
    a.out.write_text(head + body, encoding="utf-8")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
