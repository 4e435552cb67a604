"""End-to-end check on a GPU host: index, answer the questions, print the score, throughput and GPU memory.

    python -m pipeline.gpu.check --profile t4x2 [--pdfs DIR] [--questions CSV] [--out DIR]
    bash scripts/gpu_check.sh t4x2-paper

``resident`` mode (default for profiles whose engines fit together) loads the
three models in this process one after another, noting each one's GPU memory,
then indexes and answers as the app does. ``staged`` mode (default for
``stage_per_process`` profiles) runs ``pipeline.evaluation.staged``: one process per
stage. Either way the report (also ``<out>/gpu_check.json``) gives the
competition score, each stage's throughput, and each GPU's memory per stage
as ``nvidia-smi`` saw it, next to the arithmetic of ``pipeline.gpu.plan``.
Without a GPU it stops unless ``--allow-no-gpu`` (a dry run of the flow).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ..documents.ingest import list_pdfs
from ..settings import load_settings, parse_overrides
from .monitor import GpuMonitor, snapshot

SHARED = Path("../shared/unlp")  # the dev set next to the checkout (scripts/gpu_check.sh runs from the repo root)


def environment() -> dict:
    env: dict = {"python": sys.version.split()[0]}
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=10)
        env["gpus"] = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]
    except (OSError, subprocess.TimeoutExpired):
        env["gpus"] = []
    for mod in ("torch", "vllm", "transformers"):
        try:
            m = __import__(mod)
            env[mod] = getattr(m, "__version__", "?")
            if mod == "torch":
                env["torch_cuda"] = m.version.cuda
                env["cuda_available"] = bool(m.cuda.is_available())
        except Exception as e:  # noqa: BLE001 - report, never fail here
            env[mod] = f"not importable ({type(e).__name__})"
    return env


def _gpu_cols(report: dict) -> str:
    if not report.get("available"):
        return "no GPU"
    return "  ".join(f"GPU{g['index']} +{g['stage_peak_mib']:,} MiB (peak {g['peak_mib']:,}/{g['total_mib']:,})"
                     for g in report["gpus"])


def run_staged(a, argv_common: list[str]) -> tuple[dict, list[dict]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), *filter(None, [os.environ.get("PYTHONPATH")])]))
    rc = subprocess.call([sys.executable, "-m", "pipeline.evaluation.staged", *argv_common], env=env)
    if rc != 0:
        raise SystemExit(rc)
    metrics = json.loads((a.out / "metrics.json").read_text())
    rows = []
    for st in metrics["stages"]:
        if st["stage"] == "embed":
            rows.append(dict(stage="embed", model=st["model"], load_s=st["load_seconds"],
                             throughput=f"{st['passages']} passages, {st['passages_per_second']} /s; "
                                        f"{st['queries']} queries, {st['queries_per_second']} /s", gpu=st["gpu"]))
        elif st["stage"] == "rerank":
            rows.append(dict(stage="rerank", model=st["model"], load_s=st["load_seconds"],
                             throughput=f"{st['pairs']} pairs, {st['pairs_per_second']} /s "
                                        f"(retrieval {st['questions_per_second_retrieval']} questions/s)",
                             gpu=st["gpu"]))
        else:
            rows.append(dict(stage="answer", model=st["model"], load_s=st["load_seconds"],
                             throughput=f"{st['questions']} questions, {st['questions_per_second']} /s", gpu=st["gpu"]))
    return metrics, rows


def run_resident(a, s) -> tuple[dict, list[dict]]:
    from ..backends.registry import Models
    from ..evaluation.questions import read_questions
    from ..evaluation.run import evaluate, index_folder
    from ..qa import Pipeline

    rows = []
    models = Models(s)
    with GpuMonitor() as g_emb:
        t0 = time.perf_counter()
        models.embedder
        t_emb = time.perf_counter() - t0
    with GpuMonitor() as g_rr:
        t0 = time.perf_counter()
        models.reranker
        pipe = Pipeline(s, root=a.data_dir, models=models)
        t_rr = time.perf_counter() - t0
    with GpuMonitor() as g_ans:
        t0 = time.perf_counter()
        models.answerer
        t_ans = time.perf_counter() - t0
    before = pipe.library.n_chunks()
    with GpuMonitor() as g_idx:
        rep = index_folder(pipe.library, list_pdfs(a.pdfs))
    passages = pipe.library.n_chunks() - before
    questions, _ = read_questions(a.questions.read_bytes())
    questions = questions[: a.limit] if a.limit else questions
    with GpuMonitor() as g_run:
        result, traces = evaluate(pipe, questions, a.out)
    tim = [t.get("timings", {}) for t in traces if "timings" in t]
    per = {k: sum(t.get(k, 0.0) for t in tim) for k in ("retrieve", "rerank", "answer")}
    n = len(tim)
    rate = lambda k: round(n / per[k], 3) if per[k] else None  # noqa: E731
    rows.append(dict(stage="embed", model=s.roles.embed_model, load_s=t_emb, gpu=g_emb.report(),
                     throughput=f"{passages} passages, {round(passages / rep['seconds'], 3) if rep['seconds'] else None}"
                                f" /s (indexing, GPU during it: {_gpu_cols(g_idx.report())})"))
    rows.append(dict(stage="rerank", model=s.roles.rerank_model, load_s=t_rr, gpu=g_rr.report(),
                     throughput=f"{n} questions x {s.search.top_k_retrieve} candidates, {rate('rerank')} questions/s "
                                f"(retrieval {rate('retrieve')} questions/s)"))
    rows.append(dict(stage="answer", model=s.roles.answer_model, load_s=t_ans, gpu=g_ans.report(),
                     throughput=f"{n} questions, {rate('answer')} /s (GPU while answering: {_gpu_cols(g_run.report())})"))
    result["indexing"] = {"pdfs": len(rep["indexed"]), "failed": rep["failed"], "seconds": rep["seconds"]}
    return result, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.gpu.check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="t4x2")
    ap.add_argument("--pdfs", type=Path, default=SHARED / "pdfs")
    ap.add_argument("--questions", type=Path, default=None, help="default: questions.csv next to the PDFs' folder")
    ap.add_argument("--out", type=Path, default=None, help="default: runs/gpu-check-<profile>")
    ap.add_argument("--data-dir", type=Path, default=None, help="the index (default: a fresh one under --out)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--mode", choices=["auto", "resident", "staged"], default="auto")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--allow-no-gpu", action="store_true", help="run even without a GPU (a dry run of the flow)")
    a = ap.parse_args(argv)
    a.questions = a.questions or a.pdfs.parent / "questions.csv"
    a.out = a.out or Path("runs") / f"gpu-check-{a.profile}"
    a.data_dir = a.data_dir or a.out / "library"
    s = load_settings(a.profile, **parse_overrides(a.set))
    env = environment()
    print("environment:", json.dumps(env, indent=1))
    if snapshot() is None and not a.allow_no_gpu:
        print("no NVIDIA GPU visible (nvidia-smi missing or lists no device): this check needs a GPU host",
              file=sys.stderr)
        return 2
    if "vllm" in (s.search.embedder, s.rerank.reranker, s.answer.answerer):
        from .plan import table

        print(table(s))
    mode = a.mode if a.mode != "auto" else ("staged" if s.vllm.stage_per_process else "resident")
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if mode == "staged":
        common = ["--pdfs", str(a.pdfs), "--questions", str(a.questions), "--out", str(a.out),
                  "--profile", a.profile, "--data-dir", str(a.data_dir)]
        common += [x for kv in a.set for x in ("--set", kv)] + (["--limit", str(a.limit)] if a.limit else [])
        result, rows = run_staged(a, common)
    else:
        result, rows = run_resident(a, s)
    wall = time.perf_counter() - t0
    keys = ("n", "score", "answer_accuracy", "doc_accuracy", "page_proximity", "failed")
    summary = {k: result.get(k) for k in keys}
    print(f"\n== {a.profile} ({mode}) on {a.pdfs}: {summary.get('n')} questions in {wall:.0f}s")
    print("score:", json.dumps(summary))
    for r in rows:
        print(f"{r['stage']:7} {r['model']:30} load {r['load_s']:7.1f}s  {r['throughput']}\n"
              f"        GPU memory: {_gpu_cols(r['gpu'])}")
    (a.out / "gpu_check.json").write_text(json.dumps(
        {"profile": a.profile, "mode": mode, "environment": env, "summary": summary, "wall_seconds": wall,
         "stages": rows}, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
