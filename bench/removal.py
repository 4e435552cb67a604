"""What removing a document costs (issue 54): ``VectorIndex.remove_document`` on embedded Chroma libraries of
several sizes, the compaction included (the collection written anew, Chroma's vacuum), each removing one
50-passage document. Random unit-scale vectors of the embedder's width: the cost is Chroma's, not the model's.

    python -m bench.removal [--sizes 300 4000 20000]
"""
from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from pipeline.index.vectors import VectorIndex
from pipeline.settings import load_settings


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300, 4000, 20000])
    a = ap.parse_args(argv)
    s = load_settings()
    print(f"# {cpu_name()}, {len(__import__('os').sched_getaffinity(0))} cores")
    for n in a.sizes:
        with tempfile.TemporaryDirectory() as d:
            v = VectorIndex(Path(d), s, lambda: "bench", 0)
            x = np.random.default_rng(0).standard_normal((n, 384)).astype(np.float32)
            for i in range(0, n, 1000):
                j = range(i, min(n, i + 1000))
                v.add([f"{'gone' if k < 50 else 'kept'}:{k}" for k in j], x[i:i + 1000], "kept", list(j))
            v._col.update(ids=[f"gone:{k}" for k in range(50)], metadatas=[{"doc_hash": "gone", "idx": k}
                                                                           for k in range(50)])
            t = time.perf_counter()
            v.remove_document("gone")
            took = time.perf_counter() - t
            assert v._col.count() == n - 50
            v.close()
        print(f"{n:>6} passages: removing a 50-passage document took {took:.2f} s")


if __name__ == "__main__":
    main()
