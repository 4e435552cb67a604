"""Answer speed: the same questions through each variant in one invocation, alternating (issue 34).

    flock /tmp/heavy.lock .venv/bin/python -m bench.answer_speed --data-dir data/rb --every 4 \\
        --base-tree ../wt-base

Each variant runs in a worker process of its own (its own models, its own peak memory), all over the same
index (each worker a copy of it): ``../shared/unlp`` (170 leaflet questions over the 30 leaflets) and
``../shared/unlp-long`` (74 rulebook questions over the 4 rulebooks and the leaflets as distractors; the
libraries of ``bench.rulebooks``, built once under ``--data-dir``). For every question the workers are
asked one after another, in an order that turns by one each question, so no variant always goes first;
each answers with the batch run's call (``Pipeline.ask``: retrieval, reranking, page choice, answer, flag)
and its seconds are that call's wall time. ``--base-tree DIR`` runs the baseline ("main") with the code of
another checkout (its own defaults: e.g. a worktree of main); without it the baseline is this checkout
with main's answer path (Q4_K_M, one decode per option). Prints per set and variant: p50/p95 seconds per
question and their ratio to the baseline, prompt tokens per question, the worker's peak RSS, answer
accuracy, score, the answers that changed against the baseline (right→wrong, wrong→right) and the exact
McNemar p; appends the run (date, machine, CPU flags, every question's record) to
``bench/results/answer_speed.json``.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # run as a file (a worker over another checkout): bench/ must not shadow modules
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import time

HERE = Path(__file__).resolve().parents[1]
RESULTS = HERE / "bench" / "results" / "answer_speed.json"


# ---- statistics --------------------------------------------------------------------------------------------
def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p for ``b`` and ``c`` discordant pairs: the sign test on them
    (``bench.answer_quality_fit.sign_test``; imported here, not at the top: a worker runs this file over another
    checkout, which may not have it)."""
    from bench.answer_quality_fit import sign_test

    return sign_test(b, c)


def calibration(recs: list[dict]) -> dict:
    """Whether the answers' probabilities mean what they say: the mean top probability (against the accuracy)
    and the Brier score of the top probability (its squared distance from right, 1, or wrong, 0)."""
    tops = [(max(r["probabilities"].values()), float(r["right"])) for r in recs if r["probabilities"]]
    if not tops:
        return {"mean_top_p": float("nan"), "brier_top": float("nan")}
    return {"mean_top_p": statistics.fmean(p for p, _ in tops), "brier_top": statistics.fmean((p - y) ** 2 for p, y in tops)}


def summarise(recs: list[dict], base: list[dict] | None) -> dict:
    """One variant on one set; ``base``: the baseline's records of the same questions, in the same order."""
    from pipeline.evaluation.metric import percentile  # the one percentile (nearest rank)

    secs = [r["seconds"] for r in recs]
    m = {"n": len(recs), "p50_s": percentile(secs, 0.5), "p95_s": percentile(secs, 0.95),
         "mean_s": statistics.fmean(secs) if secs else float("nan"),
         "prompt_tokens": statistics.fmean(r["prompt_tokens"] for r in recs) if recs else float("nan"),
         "answer_accuracy": statistics.fmean(r["right"] for r in recs) if recs else float("nan"),
         "score": statistics.fmean(r["score"] for r in recs) if recs else float("nan"),
         **calibration(recs)}
    stood = [r for r in recs if (r.get("read_first") or {}).get("enough")]
    if any(r.get("read_first") for r in recs):  # answers the top passage alone gave, and how well they mean it
        m["stood"] = {"n": len(stood), **calibration(stood),
                      "accuracy": statistics.fmean(r["right"] for r in stood) if stood else float("nan")}
    if base is not None:
        b = sum(1 for x, y in zip(base, recs) if x["right"] and not y["right"])
        c = sum(1 for x, y in zip(base, recs) if not x["right"] and y["right"])
        bs = [r["seconds"] for r in base]
        m.update(p50_ratio=m["p50_s"] / percentile(bs, 0.5), p95_ratio=m["p95_s"] / percentile(bs, 0.95),
                 paired_median_ratio=statistics.median(y["seconds"] / x["seconds"] for x, y in zip(base, recs)),
                 changed=sum(1 for x, y in zip(base, recs) if x["letter"] != y["letter"]),
                 right_to_wrong=b, wrong_to_right=c, mcnemar_p=mcnemar_p(b, c),
                 max_prob_diff=max((max(abs(x["probabilities"][k] - y["probabilities"].get(k, 0.0))
                                        for k in x["probabilities"]) for x, y in zip(base, recs)), default=0.0))
    return m


# ---- the machine -------------------------------------------------------------------------------------------
def machine() -> dict:
    info = Path("/proc/cpuinfo").read_text(errors="replace") if Path("/proc/cpuinfo").exists() else ""
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    return {"cpu": model, "cores": os.cpu_count(), "arch": platform.machine(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30, 1),
            "flags": sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "f16c", "sse4"))),
            "load_average": os.getloadavg()}


def rss_mb(field: str) -> float:
    for ln in Path("/proc/self/status").read_text().splitlines():
        if ln.startswith(field + ":"):
            return int(ln.split()[1]) / 1024
    return float("nan")


# ---- a worker: one variant's models over the sets' libraries, answering on stdin --------------------------------
def worker(overrides: dict, roots: dict, csvs: dict) -> None:
    from pipeline.evaluation.metric import page_proximity
    from pipeline.evaluation.questions import read_questions
    from pipeline.qa import Pipeline
    from pipeline.backends.registry import Models
    from pipeline.settings import load_settings

    settings = load_settings(None, **overrides)
    t = time.perf_counter()
    models = Models(settings)
    models.load()
    ans = models.answerer
    ready = {"ready": True, "load_s": time.perf_counter() - t, "rss_after_load_mb": rss_mb("VmRSS"),
             "model": Path(getattr(ans, "model_path", "")).name, "format": getattr(ans, "model_format", "q4_k_m")}
    pipes = {name: Pipeline(settings, root=root, models=models) for name, root in roots.items()}
    qs = {name: {q.qid: q for q in read_questions(Path(csv).read_bytes())[0]} for name, csv in csvs.items()}
    pages = {name: {d.name: d.n_pages for d in p.library.documents()} for name, p in pipes.items()}
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        name, q = job["set"], qs[job["set"]][job["qid"]]
        if job.get("profile"):
            print(json.dumps(profile(pipes[name], q)), flush=True)
            continue
        t = time.perf_counter()
        a = pipes[name].ask(q)
        secs = time.perf_counter() - t
        doc_right = a.doc_name == q.gold_doc
        prox = page_proximity(a.doc_name, a.page, q.gold_doc, q.gold_page, pages[name].get(q.gold_doc, 0))
        right = a.letter == q.gold_answer
        print(json.dumps({"qid": q.qid, "seconds": secs, "letter": a.letter, "right": right, "doc_right": doc_right,
                          "page_proximity": prox, "score": 0.5 * right + 0.25 * doc_right + 0.25 * prox,
                          "probabilities": a.probabilities, "prompt_tokens": a.details.get("prompt_tokens", 0),
                          "read_first": a.details.get("read_first"),  # whether the top passage alone answered
                          "timings": a.timings, "rss_mb": rss_mb("VmRSS"), "peak_rss_mb": rss_mb("VmHWM")}),
              flush=True)


def profile(pipe, q) -> dict:
    """One question's path, stage by stage, with the answer model's decode calls counted (tokens, seconds):
    the batch run's answer, then the Ask tab's extras on the same question (option-order check, free form)."""
    ctx = pipe.models.answerer.llm._ctx
    decode, calls = ctx.decode, []

    def counted(batch):
        t = time.perf_counter()
        decode(batch)
        calls.append((batch.n_tokens(), time.perf_counter() - t))

    def took(label: str, fn):
        calls.clear()
        t = time.perf_counter()
        got = fn()
        out[label] = {"s": time.perf_counter() - t, "decodes": len(calls), "tokens": sum(n for n, _ in calls),
                      "decode_s": sum(x for _, x in calls)}
        return got

    out: dict = {}
    ctx.decode = counted
    try:
        found = took("retrieve+rerank+pages", lambda: pipe.search(q))
        a = took("answer+flag", lambda: pipe.ask(q, found=found))
        out["stages"] = {k: round(v, 3) for k, v in a.timings.items()}
        out["prompt_tokens"] = a.details.get("prompt_tokens")
        took("again (prompt cached)", lambda: pipe.ask(q))
        took("option-order check (6 orders)", lambda: pipe.order_check(q, a.evidence, 6))
        took("free form (no options)", lambda: pipe.ask(q.without_options()))
    finally:
        ctx.decode = decode
    return out


class Worker:
    def __init__(self, label: str, overrides: dict, tree: Path, roots: dict, csvs: dict):
        self.label = label
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}  # another checkout: read only
        spec = json.dumps({"overrides": overrides, "roots": {k: str(Path(v).resolve()) for k, v in roots.items()},
                           "csvs": {k: str(Path(v).resolve()) for k, v in csvs.items()}})  # the worker's cwd is its tree
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", spec], cwd=tree,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ready = self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"worker {self.label!r} stopped (exit {self.proc.wait()})")
        return json.loads(line)

    def ask(self, name: str, qid: str) -> dict:
        self.proc.stdin.write(json.dumps({"set": name, "qid": qid}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def profile(self, name: str, qid: str) -> dict:
        self.proc.stdin.write(json.dumps({"set": name, "qid": qid, "profile": True}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


# ---- the run -------------------------------------------------------------------------------------------------
DEFAULT_VARIANTS = {"auto": {}, "q4_k_m": {"answer_format": "q4_k_m"}}
MAIN_PATH = {"answer_format": "q4_k_m", "llama_batch_continuations": "false"}  # main's answer path, this checkout


def prepare(names: list[str], data_dir: Path, long_dir: Path, unlp_dir: Path, n_workers: int) -> tuple[dict, dict]:
    """Each set's library (built once, ``bench.rulebooks``), copied once per worker; questions CSVs."""
    from bench.rulebooks import library_root, open_set, sets
    from pipeline.backends.registry import Models
    from pipeline.settings import load_settings

    settings = load_settings()
    all_sets = sets(long_dir, unlp_dir)
    roots, csvs = {}, {}
    for name in names:
        pdfs, csv = all_sets[name]
        root = library_root(data_dir, name, settings)
        if not (root / "library.sqlite").exists():
            open_set(name, pdfs, data_dir, settings, Models(settings)).library.close()
        roots[name] = [root.with_name(f"{root.name}.w{i}") for i in range(n_workers)]
        for copy in roots[name]:
            if not copy.exists():
                shutil.copytree(root, copy)
        csvs[name] = csv
    return roots, csvs


def pick(qids: list[str], every: int, limit: int | None, offset: int = 0) -> list[str]:
    out = qids[offset::max(1, every)]
    return out[:limit] if limit else out


def table(summary: dict, base: str) -> str:
    lines = ["| set | variant | n | p50 s | p95 s | p50 × base | p95 × base | prompt tokens | peak RSS MB | answer acc"
             " | mean top p | Brier (top) | score | changed | right→wrong | wrong→right | McNemar p |", "|---" * 17 + "|"]
    for name, per in summary.items():
        for label, m in per.items():
            rel = (f"{m['p50_ratio']:.2f} | {m['p95_ratio']:.2f}" if label != base else "1 | 1")
            flips = (f"{m['changed']} | {m['right_to_wrong']} | {m['wrong_to_right']} | {m['mcnemar_p']:.2f}"
                     if label != base else "– | – | – | –")
            lines.append(f"| {name} | {label} | {m['n']} | {m['p50_s']:.2f} | {m['p95_s']:.2f} | {rel} | "
                         f"{m['prompt_tokens']:.0f} | {m['peak_rss_mb']:.0f} | {m['answer_accuracy']:.3f} | "
                         f"{m['mean_top_p']:.3f} | {m['brier_top']:.3f} | {m['score']:.3f} | {flips} |")
    stood = [(name, label, m["stood"]) for name, per in summary.items() for label, m in per.items() if "stood" in m]
    if stood:
        lines += ["", "| set | variant | answers that stood on the top passage | their accuracy | mean top p | Brier (top) |",
                  "|---" * 6 + "|"]
        lines += [f"| {name} | {label} | {m['n']} of {summary[name][label]['n']} | {m['accuracy']:.3f} | "
                  f"{m['mean_top_p']:.3f} | {m['brier_top']:.3f} |" for name, label, m in stood]
    return "\n".join(lines)


def record(out: Path, run: dict, recs: dict, base: str, complete: bool, **extra) -> dict:
    """The run's summary (per set and variant, paired with ``base``) written with its records into ``out``
    (replacing the entry of the same run, keeping the others); returns the summary."""
    summary = {n: {label: {**summarise(rs, None if label == base else per[base]),
                           "peak_rss_mb": max((r["peak_rss_mb"] for r in rs), default=float("nan"))}
                   for label, rs in per.items() if rs} for n, per in recs.items()}
    entry = {**run, **extra, "complete": complete, "machine": {**run["machine"], "load_now": os.getloadavg()},
             "summary": summary, "records": recs}
    old = json.loads(out.read_text()) if out.exists() else {"runs": []}
    old["runs"] = [r for r in old["runs"] if r["date"] != run["date"]] + [entry]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(old, indent=1, ensure_ascii=False))
    return summary


def from_log(path: Path, first: int | None = None) -> dict:
    """Seconds, answers and flips read back from a run's printed question lines (a run stopped before it wrote
    its records: no scores, tokens or memory there); ``first``: only the first N questions of each set."""
    import re

    from pipeline.evaluation.metric import percentile  # the one percentile (nearest rank)

    rows: dict[str, list[dict]] = {}
    for ln in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\[(\w+) (\d+)/\d+\] \S+ (.*)$", ln)
        if m and (first is None or int(m[2]) <= first):
            got = {k: {"letter": v[0], "right": v[1] == "✓", "seconds": float(v[3:-1])}
                   for k, v in (x.split("=", 1) for x in m[3].split())}
            rows.setdefault(m[1], []).append(got)
    out = {}
    for name, qs in rows.items():
        base = list(qs[0])[0]
        for label in qs[0]:
            b = sum(1 for q in qs if q[base]["right"] and not q[label]["right"])
            c = sum(1 for q in qs if not q[base]["right"] and q[label]["right"])
            secs, bs = [q[label]["seconds"] for q in qs], [q[base]["seconds"] for q in qs]
            out.setdefault(name, {})[label] = {
                "n": len(qs), "p50_s": percentile(secs, 0.5), "p95_s": percentile(secs, 0.95),
                "p50_ratio": percentile(secs, 0.5) / percentile(bs, 0.5), "p95_ratio": percentile(secs, 0.95) / percentile(bs, 0.95),
                "paired_median_ratio": statistics.median(q[label]["seconds"] / q[base]["seconds"] for q in qs),
                "answer_accuracy": statistics.fmean(q[label]["right"] for q in qs),
                "changed": sum(q[label]["letter"] != q[base]["letter"] for q in qs),
                "right_to_wrong": b, "wrong_to_right": c, "mcnemar_p": mcnemar_p(b, c)}
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        spec = json.loads(argv[1])
        worker(spec["overrides"], spec["roots"], spec["csvs"])
        return 0
    from pipeline.evaluation.questions import read_questions
    from pipeline.settings import parse_overrides

    ap = argparse.ArgumentParser(prog="python -m bench.answer_speed", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=Path("data/rb"), help="the libraries (bench.rulebooks')")
    ap.add_argument("--long", type=Path, default=Path("../shared/unlp-long"))
    ap.add_argument("--unlp", type=Path, default=Path("../shared/unlp"))
    ap.add_argument("--only", choices=["unlp", "long"], default=None, help="one set only")
    ap.add_argument("--every", type=int, default=1, help="every Nth question of each set")
    ap.add_argument("--offset", type=int, default=0, help="with --every: start at the Nth question (0-based)")
    ap.add_argument("--limit", type=int, default=None, help="at most N questions per set (after --every)")
    ap.add_argument("--base-tree", type=Path, default=None,
                    help="the baseline runs this checkout's code with its defaults (else this one, main's path)")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL:KEY=VALUE[,KEY=VALUE]",
                    help=f"a variant (default: {', '.join(DEFAULT_VARIANTS)}: this checkout's default, then Q4_K_M)")
    ap.add_argument("--profile", default=None, metavar="QID",
                    help="instead: one question's path per variant (stages, decode calls, the Ask tab's extras)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--from-log", type=Path, default=None, metavar="LOG",
                    help="instead: the figures a stopped run printed, read back from its log (and recorded)")
    ap.add_argument("--first", type=int, default=None, help="--from-log: the first N questions of each set only")
    a = ap.parse_args(argv)
    if a.from_log:
        got = from_log(a.from_log, a.first)
        for name, per in got.items():
            for label, m in per.items():
                print(f"{name} {label}: " + " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                                                   for k, v in m.items()))
        old = json.loads(a.out.read_text()) if a.out.exists() else {"runs": []}
        old["runs"].append({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                            "command": "python -m bench.answer_speed " + " ".join(argv), "machine": machine(),
                            "from_log": str(a.from_log), "complete": False, "summary": got})
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(old, indent=1, ensure_ascii=False))
        return 0
    names = [a.only] if a.only else ["unlp", "long"]
    variants = {"main": ({} if a.base_tree else dict(MAIN_PATH), (a.base_tree or HERE).resolve())}
    for label, over in ({v.partition(":")[0]: parse_overrides([p for p in v.partition(":")[2].split(",") if p])
                         for v in a.variant} or DEFAULT_VARIANTS).items():
        variants[label] = (over, HERE)
    roots, csvs = prepare(names, a.data_dir, a.long, a.unlp, len(variants))
    workers = [Worker(label, over, tree, {n: r[i] for n, r in roots.items()}, csvs)
               for i, (label, (over, tree)) in enumerate(variants.items())]
    for w in workers:
        print(f"{w.label}: {w.ready['model']} ({w.ready['format']}), loaded in {w.ready['load_s']:.1f} s, "
              f"RSS {w.ready['rss_after_load_mb']:.0f} MB", flush=True)
    if a.profile:
        for name in names:
            qid = a.profile if a.profile in {q.qid for q in read_questions(Path(csvs[name]).read_bytes())[0]} else \
                read_questions(Path(csvs[name]).read_bytes())[0][0].qid
            for w in workers:
                print(f"## {name} {qid} — {w.label}\n" + json.dumps(w.profile(name, qid), indent=1), flush=True)
        for w in workers:
            w.close()
        return 0
    recs: dict[str, dict[str, list[dict]]] = {n: {w.label: [] for w in workers} for n in names}
    t0 = time.time()
    run = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": "python -m bench.answer_speed " + " ".join(argv),
           "machine": {**machine(), "load_before": os.getloadavg()},
           "variants": {w.label: {**w.ready, "settings": variants[w.label][0], "tree": str(variants[w.label][1])}
                        for w in workers}}
    k = 0
    for name in names:
        qids = pick([q.qid for q in read_questions(Path(csvs[name]).read_bytes())[0]], a.every, a.limit, a.offset)
        for i, qid in enumerate(qids, 1):
            order = workers[k % len(workers):] + workers[:k % len(workers)]  # who goes first turns each question
            k += 1
            got = {w.label: w.ask(name, qid) for w in order}
            for label, r in got.items():
                recs[name][label].append(r)
            record(a.out, run, recs, workers[0].label, complete=False)  # an interrupted run keeps what it measured
            print(f"[{name} {i}/{len(qids)}] {qid} " + " ".join(
                f"{w.label}={got[w.label]['letter']}{'✓' if got[w.label]['right'] else '✗'}"
                f"/{got[w.label]['seconds']:.1f}s" for w in workers), flush=True)
    for w in workers:
        w.close()
    summary = record(a.out, run, recs, workers[0].label, complete=True, minutes=(time.time() - t0) / 60)
    print(table(summary, workers[0].label))
    print(f"written to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
