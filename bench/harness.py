"""What the benchmarks share: questions × variants in one invocation, per-question records, paired comparison,
and the machine and command each record was made on.

* ``machine()``, ``command(prog, argv)``, ``stamp(prog, argv)``: where and how a figure was measured (the CPU's
  model name and its vector flags, AVX-512 and AMX included, from ``/proc/cpuinfo``; cores, memory, load);
* ``ordered``, ``halves``, ``pick``: which questions (a hash order, so a partial run is a fair sample) and which
  half of a library (by a hash of the document's name);
* ``sets``, ``prepare``: the two sets of the benchmarks — ``unlp`` (the leaflets' questions over the leaflets)
  and ``long`` (the rulebooks' questions over the rulebooks and the leaflets as distractors) — each indexed once
  under a data folder and copied once per worker;
* ``Worker``: one variant (settings overrides, optionally another checkout's code) in a process of its own, its
  own models and peak memory, answering one question at a time with ``Pipeline.ask``; ``alternate`` asks every
  worker each question, in an order that turns by one each question, so no variant always goes first;
* ``summarise``, ``paired``, ``mcnemar_p``: seconds (p50/p95 and their ratio to the baseline), accuracy, score,
  and the answers that changed against the baseline with the exact McNemar p;
* ``record``: a run (date, machine, command, variants, every question's record, the summary) into a JSON file
  of runs, rewritten after every question so an interrupted run keeps what it measured.

This file is also the worker's program (``python bench/harness.py --worker SPEC``), run over another checkout's
``pipeline`` (``--base-tree``): below the guard it imports only the standard library, and ``pipeline`` only
inside functions.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # run as a file (a worker over another checkout): bench/ must not shadow modules
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import datetime
import hashlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import time

ROOT = Path(__file__).resolve().parents[1]


# ---- where and how ---------------------------------------------------------------------------------------
def machine() -> dict:
    """The CPU's model name (and with its family and model numbers), cores, architecture, memory, its vector flags
    (avx*, amx*, fma, f16c, sse4*) and the load average now."""
    from pipeline.backends.answer_path import cpu_model

    info = Path("/proc/cpuinfo").read_text(errors="replace") if Path("/proc/cpuinfo").exists() else ""
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    return {"cpu": model or platform.processor(), "cpu_model": cpu_model(),
            "cores": os.cpu_count(), "arch": platform.machine(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30, 1),
            "flags": sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "f16c", "sse4"))),
            "load_average": os.getloadavg()}


def command(prog: str, argv: list[str]) -> str:
    """The command line that reproduces a run: ``python -m <prog> <argv>``."""
    return " ".join(["python -m", prog, *argv])


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def stamp(prog: str, argv: list[str]) -> str:
    """One line for a results page: date, machine and command."""
    m = machine()
    avx512 = " AVX-512" if any(f.startswith("avx512") for f in m["flags"]) else ""
    amx = " AMX" if any(f.startswith("amx") for f in m["flags"]) else ""
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {m['cpu'] or m['arch']}"
            f"{avx512}{amx}, {m['cores']} cores, load average {m['load_average'][0]:.1f}; "
            f"command: `{command(prog, argv)}`")


# ---- which questions -------------------------------------------------------------------------------------
def ordered(questions: list) -> list:
    """Questions in the order of a hash of their ID: any prefix is a fair sample spread over the documents."""
    return sorted(questions, key=lambda q: hashlib.sha1(q.qid.encode()).hexdigest())


def halves(names: list[str]) -> tuple[set, set]:
    """Documents split into two halves by a hash of their name."""
    a = {n for n in names if int(hashlib.sha1(n.encode()).hexdigest(), 16) % 2 == 0}
    return a, set(names) - a


def pick(qids: list[str], every: int, limit: int | None, offset: int = 0) -> list[str]:
    """Every ``every``-th question from ``offset``, at most ``limit``."""
    out = qids[offset::max(1, every)]
    return out[:limit] if limit else out


# ---- the sets and their libraries ------------------------------------------------------------------------
def sets(long_dir: Path, unlp_dir: Path) -> dict[str, tuple[list[Path], Path]]:
    """name → (the library's PDFs, the questions CSV); each folder holds ``pdfs/`` and ``questions.csv``."""
    from pipeline.documents.ingest import list_pdfs

    leaflets = list_pdfs(unlp_dir / "pdfs")
    return {"unlp": (leaflets, unlp_dir / "questions.csv"),
            "long": (list_pdfs(long_dir / "pdfs") + leaflets, long_dir / "questions.csv")}


def library_root(data_dir: Path, name: str, settings) -> Path:
    return data_dir / f"{name}-{settings.fingerprint()}"


def open_set(name: str, pdfs: list[Path], data_dir: Path, settings, models, say=print):
    """The set's pipeline over its library, indexed (built once per fingerprint; the long set's library starts
    as a copy of the leaflets' one when that exists, so the leaflets are embedded once)."""
    from pipeline.evaluation.run import index_folder
    from pipeline.qa import Pipeline

    root = library_root(data_dir, name, settings)
    seed = library_root(data_dir, "unlp", settings)
    if name != "unlp" and not root.exists() and (seed / "library.sqlite").exists():
        say(f"{name}: starting from a copy of {seed}")
        shutil.copytree(seed, root)
    pipe = Pipeline(settings, root=root, models=models)
    report = index_folder(pipe.library, pdfs, say=lambda m: None)
    if report["failed"]:
        raise SystemExit(f"{name}: indexing failed: {report['failed']}")
    say(f"{name}: {len(report['indexed'])} PDFs ready in {report['seconds']:.0f} s ({root})")
    return pipe


def prepare(names: list[str], data_dir: Path, long_dir: Path, unlp_dir: Path, n_workers: int) -> tuple[dict, dict]:
    """Each set's library (built once), copied once per worker: ({set: [root per worker]}, {set: questions CSV})."""
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


# ---- paired comparison -----------------------------------------------------------------------------------
def sign_test(only_a: int, only_b: int) -> float:
    """Exact two-sided sign test on the questions where exactly one of two variants is right."""
    m = only_a + only_b
    return min(1.0, 2 * sum(math.comb(m, i) for i in range(min(only_a, only_b) + 1)) / 2 ** m) if m else 1.0


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p for ``b`` and ``c`` discordant pairs (the sign test on them)."""
    return sign_test(b, c)


def paired(base: list[dict], recs: list[dict]) -> dict:
    """The same questions' records of a variant against the baseline's, in the same order: answers changed,
    right→wrong, wrong→right and the McNemar p."""
    assert [r.get("qid") for r in base] == [r.get("qid") for r in recs], "records of other questions"
    b = sum(1 for x, y in zip(base, recs) if x["right"] and not y["right"])
    c = sum(1 for x, y in zip(base, recs) if not x["right"] and y["right"])
    return {"changed": sum(1 for x, y in zip(base, recs) if x["letter"] != y["letter"]),
            "right_to_wrong": b, "wrong_to_right": c, "mcnemar_p": mcnemar_p(b, c)}


def summarise(recs: list[dict], base: list[dict] | None = None) -> dict:
    """One variant on one set: n, p50/p95/mean seconds, answer accuracy, score, peak RSS; with ``base`` (the
    baseline's records of the same questions, in the same order) the ratios of its seconds and ``paired``."""
    from pipeline.evaluation.metric import percentile  # the one percentile (nearest rank)

    secs = [r["seconds"] for r in recs]
    mean = lambda k: statistics.fmean(r[k] for r in recs) if recs else float("nan")  # noqa: E731
    m = {"n": len(recs), "p50_s": percentile(secs, 0.5), "p95_s": percentile(secs, 0.95),
         "mean_s": statistics.fmean(secs) if secs else float("nan"), "answer_accuracy": mean("right"),
         "score": mean("score"), "peak_rss_mb": max((r.get("peak_rss_mb", float("nan")) for r in recs),
                                                     default=float("nan"))}
    if base is not None:
        bs = [r["seconds"] for r in base]
        m.update(p50_ratio=m["p50_s"] / percentile(bs, 0.5), p95_ratio=m["p95_s"] / percentile(bs, 0.95),
                 paired_median_ratio=statistics.median(y["seconds"] / x["seconds"] for x, y in zip(base, recs)),
                 **paired(base, recs))
    return m


# ---- a worker: one variant's models over the sets' libraries, answering on stdin ---------------------------
def rss_mb(field: str) -> float:
    for ln in Path("/proc/self/status").read_text().splitlines():
        if ln.startswith(field + ":"):
            return int(ln.split()[1]) / 1024
    return float("nan")


def worker(overrides: dict, roots: dict, csvs: dict) -> None:
    """Load one variant's models, then answer ``{"set", "qid"}`` lines from stdin with one JSON record each."""
    from pipeline.backends.registry import Models
    from pipeline.evaluation.metric import page_proximity
    from pipeline.evaluation.questions import read_questions
    from pipeline.qa import Pipeline
    from pipeline.settings import load_settings

    settings = load_settings(None, **overrides)
    t = time.perf_counter()
    models = Models(settings)
    models.load()
    ans = models.answerer
    ready = {"ready": True, "load_s": time.perf_counter() - t, "rss_after_load_mb": rss_mb("VmRSS"),
             "model": Path(getattr(ans, "model_path", "")).name, "format": getattr(ans, "model_format", "q4_k_m"),
             "answer_path": getattr(ans, "answer_path", None),
             "cpu_variant": getattr(ans, "cpu_variant", None)}  # llama.cpp's CPU kernels (pipeline.backends.ggml_cpu)
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
                          "calibration": a.details.get("calibration"),  # the power and lapse the shown ones took
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
    """One variant in a process of its own: ``overrides`` (settings) over the code of ``tree`` (a checkout), its
    sets' libraries ``roots`` (one copy per worker) and questions ``csvs``."""

    def __init__(self, label: str, overrides: dict, tree: Path, roots: dict, csvs: dict):
        self.label = label
        # another checkout: read only; a PYTHONPATH given to the run stays after it (.llama-portable: the portable
        # llama.cpp build, its CPU variant chosen by PDFQA_LLAMA_CPU_VARIANT)
        path = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
        env = {**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}
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

    def _job(self, job: dict) -> dict:
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def ask(self, name: str, qid: str) -> dict:
        return self._job({"set": name, "qid": qid})

    def profile(self, name: str, qid: str) -> dict:
        return self._job({"set": name, "qid": qid, "profile": True})

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


# ---- the run ---------------------------------------------------------------------------------------------
def alternate(workers: list[Worker], questions: dict[str, list[str]], on_question=None) -> dict:
    """Every question of every set (``{set: [qid]}``) asked of every worker, who goes first turning by one each
    question; ``on_question(set, i, n, qid, {label: record}, recs)`` after each. Returns
    ``{set: {label: [record]}}``, every list in the same question order."""
    recs = {name: {w.label: [] for w in workers} for name in questions}
    k = 0
    for name, qids in questions.items():
        for i, qid in enumerate(qids, 1):
            order = workers[k % len(workers):] + workers[:k % len(workers)]
            k += 1
            got = {w.label: w.ask(name, qid) for w in order}
            for w in workers:
                recs[name][w.label].append(got[w.label])
            if on_question:
                on_question(name, i, len(qids), qid, got, recs)
    return recs


def record(out: Path, entry: dict) -> None:
    """``entry`` (a run: its ``date`` names it) into the JSON file of runs ``out``, replacing the entry of the same
    run and keeping the others."""
    old = json.loads(out.read_text()) if out.exists() else {"runs": []}
    old["runs"] = [r for r in old["runs"] if r["date"] != entry["date"]] + [entry]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(old, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    if sys.argv[1:2] != ["--worker"]:
        raise SystemExit("usage: python bench/harness.py --worker SPEC  (started by bench.harness.Worker)")
    spec = json.loads(sys.argv[2])
    worker(spec["overrides"], spec["roots"], spec["csvs"])
