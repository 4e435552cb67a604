"""The ``vllm-cpu`` profile side by side with ``cpu``: the same pipeline and weights, vLLM against llama.cpp.

    python -m bench.vllm_cpu --pdfs ../shared/unlp/pdfs --questions ../shared/unlp/questions.csv --every 17 \\
        --out runs/vllm-cpu [--data-dir runs/vllm-cpu/data]

Runs ``python -m pipeline.evaluate`` twice on every ``--every``-th question (rows 0, k, 2k, ...: a fixed
subset spread over the documents), sharing one index:

* ``cpu --set scorer=letter`` in the app's venv (``.venv``): llama.cpp, the Q4_K_M GGUF;
* ``vllm-cpu`` in vLLM's CPU venv (``.venv-vllm``): vLLM, the same GGUF dequantized to bf16
  (``pipeline.backends.vllm_model``), scored by letter.

Retrieval, reranking, prompts and scorer are the same, so the table isolates the engine. It prints (and with
``--md`` writes) one table: answer accuracy, score, p50 seconds per question, and on how many questions the two
give the same answer, with the probability differences and each disagreement listed.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import harness

ROOT = Path(__file__).resolve().parent.parent
RUNS = {"cpu (llama.cpp, letter)": (".venv", "cpu", ["--set", "scorer=letter"]),
        "vllm-cpu (vLLM, letter)": (".venv-vllm", "vllm-cpu", [])}


def subset(questions: Path, every: int, out: Path) -> int:
    with open(questions, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    keep = rows[::every]
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(keep)
    return len(keep)


def read_run(folder: Path) -> tuple[dict, dict[str, dict]]:
    metrics = json.loads((folder / "metrics.json").read_text())
    trace = {}
    for line in (folder / "trace.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            trace[r["Question_ID"]] = r
    return metrics, trace


def compare(a: dict[str, dict], b: dict[str, dict]) -> dict:
    """Same answers; the largest probability difference per question (over the six letters)."""
    common = sorted(set(a) & set(b))
    same = [q for q in common if a[q].get("answer") == b[q].get("answer")]
    diffs = {q: max(abs(a[q].get("probabilities", {}).get(L, 0.0) - b[q].get("probabilities", {}).get(L, 0.0))
                    for L in "ABCDEF") for q in common}
    same_evidence = [q for q in common if a[q].get("evidence") == b[q].get("evidence")]
    as_recs = lambda t: [{"qid": q, "letter": t[q].get("answer"),  # noqa: E731
                          "right": t[q].get("answer") == t[q].get("gold", {}).get("answer")} for q in common]
    return {"n": len(common), "same": len(same), "same_evidence": len(same_evidence),
            **harness.paired(as_recs(a), as_recs(b)),
            "max_dp_median": statistics.median(diffs.values()) if diffs else None,
            "max_dp_max": max(diffs.values()) if diffs else None,
            "disagree": [q for q in common if q not in same], "diffs": diffs}


def table(results: dict[str, dict], cmp: dict, a: dict, b: dict) -> str:
    lines = ["| run | answer accuracy | score | p50 s / question | failed |", "|---|---|---|---|---|"]
    for name, m in results.items():
        lines.append(f"| {name} | {m.get('answer_accuracy', 0):.3f} | {m.get('score', 0):.3f} | "
                     f"{m.get('p50_seconds', 0):.1f} | {m.get('failed', 0)} |")
    lines += ["", f"Same answer on **{cmp['same']} of {cmp['n']}** questions (same evidence on {cmp['same_evidence']}; "
              f"right→wrong {cmp['right_to_wrong']}, wrong→right {cmp['wrong_to_right']}, McNemar p "
              f"{cmp['mcnemar_p']:.2f}); "
              f"largest letter-probability difference per question: median {cmp['max_dp_median']:.3f}, "
              f"max {cmp['max_dp_max']:.3f}."]
    if cmp["disagree"]:
        lines += ["", "| question | gold | cpu: answer (p) | vllm-cpu: answer (p) |", "|---|---|---|---|"]
        for q in cmp["disagree"]:
            ra, rb = a[q], b[q]
            pa, pb = ra.get("probabilities", {}), rb.get("probabilities", {})
            fmt = lambda r, p: f"{r.get('answer')} ({p.get(r.get('answer'), 0):.2f}; " + ", ".join(  # noqa: E731
                f"{L} {v:.2f}" for L, v in sorted(p.items(), key=lambda kv: -kv[1])[:3]) + ")"
            lines.append(f"| {q} | {ra.get('gold', {}).get('answer', '?')} | {fmt(ra, pa)} | {fmt(rb, pb)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.vllm_cpu", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--every", type=int, default=17, help="every k-th question (rows 0, k, 2k, ...)")
    ap.add_argument("--out", type=Path, default=Path("runs/vllm-cpu"))
    ap.add_argument("--data-dir", type=Path, default=None, help="the shared index (default: OUT/data)")
    ap.add_argument("--only", choices=["cpu", "vllm-cpu", "none"],
                    help="run one of the two, or none (the folders of earlier runs are read)")
    ap.add_argument("--md", type=Path, help="also write the table here")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    data = a.data_dir or a.out / "data"
    qs = a.out / "questions.csv"
    n = subset(a.questions, a.every, qs)
    print(f"{n} questions (every {a.every}th of {a.questions})", flush=True)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    folders = {}
    for name, (venv, profile, extra) in RUNS.items():
        folders[name] = a.out / profile
        if a.only and a.only != profile:
            continue
        cmd = [str(ROOT / venv / "bin" / "python"), "-m", "pipeline.evaluate", "--pdfs", str(a.pdfs),
               "--questions", str(qs), "--out", str(folders[name]), "--profile", profile, "--data-dir", str(data),
               *extra]
        print("$", " ".join(cmd), flush=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, check=True)
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
    missing = [str(f) for f in folders.values() if not (f / "metrics.json").exists()]
    if missing:
        print(f"nothing to compare yet: no run in {', '.join(missing)}")
        return 0
    runs = {name: read_run(f) for name, f in folders.items()}
    (ma, ta), (mb, tb) = runs.values()
    cmp = compare(ta, tb)
    md = harness.stamp("bench.vllm_cpu", sys.argv[1:] if argv is None else argv) + "\n\n" + \
        table({name: m for name, (m, _) in runs.items()}, cmp, ta, tb)
    print(md)
    if a.md:
        a.md.write_text(md + "\n", encoding="utf-8")
    (a.out / "comparison.json").write_text(json.dumps({k: v for k, v in cmp.items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
