"""Answer speed: the same questions through each variant in one invocation, alternating (issue 34).

    flock /tmp/heavy.lock .venv/bin/python -m bench.answer_speed --data-dir data/rb --every 4 \\
        --base-tree ../wt-base

Each variant runs in a worker process of its own (``bench.harness.Worker``: its own models, its own peak
memory), all over the same index (each worker a copy of it): ``../shared/unlp`` (170 leaflet questions over the
30 leaflets) and ``../shared/unlp-long`` (74 rulebook questions over the 4 rulebooks and the leaflets as
distractors; the harness's sets, built once under ``--data-dir``). For every question the workers are
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

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench import harness
from bench.harness import Worker, pick

HERE = Path(__file__).resolve().parents[1]
RESULTS = HERE / "bench" / "results" / "answer_speed.json"


def tops(recs: list[dict]) -> list[tuple[float, float]]:
    """Each answer's top probability and whether it was right (1.0 or 0.0)."""
    return [(max(r["probabilities"].values()), float(r["right"])) for r in recs if r["probabilities"]]


def brier_top(recs: list[dict]) -> float:
    """The Brier score of the top probability: its squared distance from right (1) or wrong (0)."""
    t = tops(recs)
    return statistics.fmean((p - y) ** 2 for p, y in t) if t else float("nan")


def calibration(recs: list[dict], chance: bool = True) -> dict:
    """Whether the answers' probabilities mean what they say: the mean top probability (against the accuracy),
    :func:`brier_top` and the expected calibration error beside (``chance``: 1,000 draws, ~0.1 s) what chance
    alone gives a calibrated answerer on as many questions (with the share of chance draws at least as large: a
    small p means the probabilities are off)."""
    from pipeline.evaluation.scoring import ece, ece_by_chance

    t = tops(recs)
    if not t:
        return {"mean_top_p": float("nan"), "brier_top": float("nan")}
    conf, right = [p for p, _ in t], [y for _, y in t]
    m = {"mean_top_p": statistics.fmean(conf), "brier_top": brier_top(recs), "ece": ece(conf, right)}
    if chance:  # what a perfectly calibrated answerer shows at these confidences
        m["ece_chance"], m["ece_p"] = ece_by_chance(conf, right)
    return m


def summarise(recs: list[dict], base: list[dict] | None, chance: bool = True) -> dict:
    """One variant on one set (``harness.summarise``: seconds, accuracy, score, flips against ``base``) with the
    prompt tokens, the calibration (``chance``: with what chance gives), the answers the top passage alone gave and
    the largest probability change."""
    m = {**harness.summarise(recs, base),
         "prompt_tokens": statistics.fmean(r["prompt_tokens"] for r in recs) if recs else float("nan"),
         **calibration(recs, chance)}
    stood = [r for r in recs if (r.get("read_first") or {}).get("enough")]
    if any(r.get("read_first") for r in recs):  # answers the top passage alone gave, and how well they mean it
        m["stood"] = {"n": len(stood), **calibration(stood, chance),
                      "accuracy": statistics.fmean(r["right"] for r in stood) if stood else float("nan")}
    if base is not None:
        m["max_prob_diff"] = max((max(abs(x["probabilities"][k] - y["probabilities"].get(k, 0.0))
                                      for k in x["probabilities"]) for x, y in zip(base, recs)), default=0.0)
    return m


# ---- the shown probabilities' calibration (settings: calibration_by_path) ------------------------------------
RULES = ("stood", "read")  # the top passage was enough (read_first) / every passage was read
POWERS = [round(0.3 + 0.05 * i, 2) for i in range(25)]  # 0.3 … 1.5


def rule_of(r: dict) -> str:
    return "stood" if (r.get("read_first") or {}).get("enough") else "read"


def raised(r: dict, power: float) -> dict:
    """A record with its six probabilities as scored (a power the run applied, ``calibration``, undone) raised to
    ``power`` as ``answer.calibrated`` shows them (``answer.powered``; the letter and rightness unchanged)."""
    from pipeline.answering.answer import powered

    return {**r, "probabilities": powered(r["probabilities"], power / float((r.get("calibration") or {}).get("power", 1.0)))}


def fit_calibration(recs: list[dict]) -> dict[str, float]:
    """Per first-passage rule, the power that minimises the Brier score of the top probability over ``recs``
    (records as this run writes them, probabilities as they were shown there)."""
    out = {}
    for rule in RULES:
        mine = [r for r in recs if rule_of(r) == rule and r["probabilities"]]
        out[rule] = min(POWERS, key=lambda a: brier_top([raised(r, a) for r in mine])) if mine else 1.0
    return out


def fit_report(runs: list[dict], variant: str) -> str:
    """``--fit-calibration``: the powers fitted on the first run's records of ``variant`` (both sets pooled), and
    each run's calibration per set as shown and with those powers (later runs: held out)."""
    fitted = fit_calibration([r for per in runs[0]["records"].values() for r in per.get(variant, [])])
    lines = [f"fitted on {runs[0]['date']} ({runs[0]['command']}): {fitted}",
             "| run | set | n | as scored: mean top p / acc, ECE (chance, p) | with the powers: mean top p, ECE (chance, p) |",
             "|---|---|---|---|---|"]
    for i, run in enumerate(runs):
        for name, per in run["records"].items():
            recs = per.get(variant, [])
            if not recs:
                continue
            acc = statistics.fmean(r["right"] for r in recs)
            a, b = calibration([raised(r, 1.0) for r in recs]), calibration([raised(r, fitted[rule_of(r)]) for r in recs])
            lines.append(f"| {'fit' if i == 0 else 'held out'} {run['date'][:16]} | {name} | {len(recs)} | "
                         f"{a['mean_top_p']:.3f} / {acc:.3f}, {a['ece']:.3f} ({a['ece_chance']:.3f}, {a['ece_p']:.2f}) | "
                         f"{b['mean_top_p']:.3f}, {b['ece']:.3f} ({b['ece_chance']:.3f}, {b['ece_p']:.2f}) |")
    return "\n".join(lines)


# ---- the run -------------------------------------------------------------------------------------------------
DEFAULT_VARIANTS = {"auto": {}, "q4_k_m": {"answer_format": "q4_k_m"}}
MAIN_PATH = {"answer_format": "q4_k_m", "llama_batch_continuations": "false"}  # main's answer path, this checkout


def table(summary: dict, base: str) -> str:
    lines = ["| set | variant | n | p50 s | p95 s | p50 × base | p95 × base | prompt tokens | peak RSS MB | answer acc"
             " | mean top p | Brier (top) | ECE (chance, p) | score | changed | right→wrong | wrong→right | McNemar p |",
             "|---" * 18 + "|"]
    for name, per in summary.items():
        for label, m in per.items():
            rel = (f"{m['p50_ratio']:.2f} | {m['p95_ratio']:.2f}" if label != base else "1 | 1")
            flips = (f"{m['changed']} | {m['right_to_wrong']} | {m['wrong_to_right']} | {m['mcnemar_p']:.2f}"
                     if label != base else "– | – | – | –")
            lines.append(f"| {name} | {label} | {m['n']} | {m['p50_s']:.2f} | {m['p95_s']:.2f} | {rel} | "
                         f"{m['prompt_tokens']:.0f} | {m['peak_rss_mb']:.0f} | {m['answer_accuracy']:.3f} | "
                         f"{m['mean_top_p']:.3f} | {m['brier_top']:.3f} | {m.get('ece', float('nan')):.3f} "
                         f"({m.get('ece_chance', float('nan')):.3f}, {m.get('ece_p', float('nan')):.2f}) | "
                         f"{m['score']:.3f} | {flips} |")
    stood = [(name, label, m["stood"]) for name, per in summary.items() for label, m in per.items() if "stood" in m]
    if stood:
        lines += ["", "| set | variant | answers that stood on the top passage | their accuracy | mean top p | Brier (top) |",
                  "|---" * 6 + "|"]
        lines += [f"| {name} | {label} | {m['n']} of {summary[name][label]['n']} | {m['accuracy']:.3f} | "
                  f"{m['mean_top_p']:.3f} | {m['brier_top']:.3f} |" for name, label, m in stood]
    return "\n".join(lines)


def record(out: Path, run: dict, recs: dict, base: str, complete: bool, **extra) -> dict:
    """The run's summary (per set and variant, paired with ``base``) written with its records into ``out``
    (``harness.record``: replacing the entry of the same run, keeping the others; what chance gives the calibration
    error only once ``complete``: it is recorded after every question); returns the summary."""
    summary = {n: {label: summarise(rs, None if label == base else per[base], chance=complete)
                   for label, rs in per.items() if rs} for n, per in recs.items()}
    harness.record(out, {**run, **extra, "complete": complete,
                         "machine": {**run["machine"], "load_now": harness.machine()["load_average"]},
                         "summary": summary, "records": recs})
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
            secs, bs = [q[label]["seconds"] for q in qs], [q[base]["seconds"] for q in qs]
            out.setdefault(name, {})[label] = {
                "n": len(qs), "p50_s": percentile(secs, 0.5), "p95_s": percentile(secs, 0.95),
                "p50_ratio": percentile(secs, 0.5) / percentile(bs, 0.5), "p95_ratio": percentile(secs, 0.95) / percentile(bs, 0.95),
                "paired_median_ratio": statistics.median(q[label]["seconds"] / q[base]["seconds"] for q in qs),
                "answer_accuracy": statistics.fmean(q[label]["right"] for q in qs),
                **harness.paired([q[base] for q in qs], [q[label] for q in qs])}
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from pipeline.evaluation.questions import read_questions
    from pipeline.settings import parse_overrides

    ap = argparse.ArgumentParser(prog="python -m bench.answer_speed", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=Path("data/rb"), help="the sets' libraries (built once)")
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
    ap.add_argument("--no-base", action="store_true",
                    help="no baseline: only the --variant ones (the first is compared with the others)")
    ap.add_argument("--profile", default=None, metavar="QID",
                    help="instead: one question's path per variant (stages, decode calls, the Ask tab's extras)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--from-log", type=Path, default=None, metavar="LOG",
                    help="instead: the figures a stopped run printed, read back from its log (and recorded)")
    ap.add_argument("--first", type=int, default=None, help="--from-log: the first N questions of each set only")
    ap.add_argument("--fit-calibration", nargs="+", type=int, default=None, metavar="RUN",
                    help="instead: fit the shown probabilities' powers per first-passage rule on run RUN of --out "
                         "(an index: -1 the last) and show them on the other runs named (held out)")
    ap.add_argument("--fit-variant", default="now", help="--fit-calibration: the variant whose records are fitted")
    a = ap.parse_args(argv)
    if a.fit_calibration:
        runs = json.loads(a.out.read_text(encoding="utf-8"))["runs"]
        print(fit_report([runs[i] for i in a.fit_calibration], a.fit_variant))
        return 0
    if a.from_log:
        got = from_log(a.from_log, a.first)
        for name, per in got.items():
            for label, m in per.items():
                print(f"{name} {label}: " + " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                                                   for k, v in m.items()))
        harness.record(a.out, {"date": harness.now(), "command": harness.command("bench.answer_speed", argv),
                               "machine": harness.machine(), "from_log": str(a.from_log), "complete": False,
                               "summary": got})
        return 0
    names = [a.only] if a.only else ["unlp", "long"]
    variants = {} if a.no_base else {"main": ({} if a.base_tree else dict(MAIN_PATH), (a.base_tree or HERE).resolve())}
    for label, over in ({v.partition(":")[0]: parse_overrides([p for p in v.partition(":")[2].split(",") if p])
                         for v in a.variant} or DEFAULT_VARIANTS).items():
        variants[label] = (over, HERE)
    roots, csvs = harness.prepare(names, a.data_dir, a.long, a.unlp, len(variants))
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
    t0, here = time.time(), harness.machine()
    run = {"date": harness.now(), "command": harness.command("bench.answer_speed", argv),
           "machine": {**here, "load_before": here["load_average"]},
           "variants": {w.label: {**w.ready, "settings": variants[w.label][0], "tree": str(variants[w.label][1])}
                        for w in workers}}
    questions = {name: pick([q.qid for q in read_questions(Path(csvs[name]).read_bytes())[0]], a.every, a.limit,
                            a.offset) for name in names}

    def said(name, i, n, qid, got, recs):
        record(a.out, run, recs, workers[0].label, complete=False)  # an interrupted run keeps what it measured
        print(f"[{name} {i}/{n}] {qid} " + " ".join(
            f"{w.label}={got[w.label]['letter']}{'✓' if got[w.label]['right'] else '✗'}"
            f"/{got[w.label]['seconds']:.1f}s" for w in workers), flush=True)

    recs = harness.alternate(workers, questions, said)
    for w in workers:
        w.close()
    summary = record(a.out, run, recs, workers[0].label, complete=True, minutes=(time.time() - t0) / 60)
    print(table(summary, workers[0].label))
    print(f"written to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
