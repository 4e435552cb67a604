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
LAPSES = [round(0.02 * i, 2) for i in range(16)]  # 0 … 0.3
FORMS = ("lapse", "power+lapse", "rule")  # what --fit-calibration fits: a lapse; one power and a lapse; a power per rule


def rule_of(r: dict) -> str:
    return "stood" if (r.get("read_first") or {}).get("enough") else "read"


def scored(r: dict) -> dict:
    """A record with its probabilities as scored: the calibration the run applied (its ``calibration``: a power,
    then a lapse over the options given, those above 0) undone."""
    from pipeline.answering.answer import powered

    c, p = r.get("calibration") or {}, r["probabilities"]
    e, given = float(c.get("lapse", 0.0)), [L for L, v in p.items() if v > 0]
    if e and given:
        p = {L: max((v - e / len(given)) / (1 - e), 0.0) if v > 0 else 0.0 for L, v in p.items()}
    return {**r, "probabilities": powered(p, 1.0 / float(c.get("power", 1.0))), "calibration": None}


def shown(r: dict, entry: dict) -> dict:
    """A record (probabilities as scored: :func:`scored`) as ``answer.calibrated`` shows it with a
    ``calibration_by_path`` entry (its rule's power, then its lapse); the letter and rightness unchanged."""
    from pipeline.answering.answer import lapsed, powered

    p = powered(r["probabilities"], float(entry.get(rule_of(r), 1.0)))
    return {**r, "probabilities": lapsed(p, float(entry.get("lapse", 0.0)), [L for L, v in p.items() if v > 0])}


def fit_calibration(recs: list[dict], form: str = "lapse") -> dict[str, float]:
    """The ``calibration_by_path`` entry of ``form`` (:data:`FORMS`) with the lowest Brier score of the top
    probability over ``recs`` (records as a run writes them; a calibration it applied is undone first)."""
    recs = [scored(r) for r in recs if r["probabilities"]]
    if form == "rule":
        return {rule: min(POWERS, key=lambda a: brier_top([shown(r, {rule: a}) for r in recs if rule_of(r) == rule]))
                if any(rule_of(r) == rule for r in recs) else 1.0 for rule in RULES}
    grid = [{"lapse": e} for e in LAPSES] if form == "lapse" else \
        [{"stood": a, "read": a, "lapse": e} for a in POWERS for e in LAPSES]
    return min(grid, key=lambda entry: brier_top([shown(r, entry) for r in recs]))


def _cal_cells(recs: list[dict]) -> str:
    c = calibration(recs)
    return f"{c['mean_top_p']:.3f} | {c['brier_top']:.3f} | {c['ece']:.3f} ({c['ece_chance']:.3f}, {c['ece_p']:.2f})"


def _fit_row(fitted: str, what: str, name: str, before: list[dict], after: list[dict]) -> str:
    """One row of :func:`fit_report`: records as scored (``before``) and as shown with the entry (``after``)."""
    return (f"| {fitted} | {what} | {name} | {len(before)} | {statistics.fmean(r['right'] for r in before):.3f} | "
            f"{_cal_cells(before).replace(' | ', ', ')} | {_cal_cells(after)} |")


def fit_report(runs: list[tuple[str, dict]], checks: list[tuple[str, dict]], form: str) -> str:
    """``--fit-calibration``: each named run's records (``runs``: (what, {set: records})) shown as scored and with
    the entry fitted on the other runs (held out), all runs' held-out answers together, then the entry fitted on
    every run, shown on the ``checks`` (other runs or paths, held out)."""
    pooled = lambda parts: [r for _, per in parts for recs in per.values() for r in recs]  # noqa: E731
    head = ["| fitted on | shown on | set | n | acc | as scored: mean top p, Brier (top), ECE (chance, p) "
            "| with the entry: mean top p | Brier (top) | ECE (chance, p) |", "|---" * 8 + "|"]
    lines, held = [f"form: {form}"] + head, {}
    for i, (what, per) in enumerate(runs if len(runs) > 1 else []):
        entry = fit_calibration(pooled(runs[:i] + runs[i + 1:]), form)
        for name, recs in per.items():
            before = [scored(r) for r in recs]
            after = [shown(r, entry) for r in before]
            scored_here, shown_here = held.setdefault(name, ([], []))
            scored_here.extend(before)
            shown_here.extend(after)
            lines.append(_fit_row(f"the others: {entry}", what, name, before, after))
    for name, (before, after) in held.items():  # every answer shown with what the runs it is not in fit
        lines.append(_fit_row("each from the others", f"all {len(runs)}", name, before, after))
    entry = fit_calibration(pooled(runs), form)
    lines += ["", f"fitted on all {len(runs)}: {json.dumps(entry)}"] + head
    for what, per in checks:
        for name, recs in per.items():
            before = [scored(r) for r in recs]
            lines.append(_fit_row(f"all {len(runs)}", what, name, before, [shown(r, entry) for r in before]))
    return "\n".join(lines)


def named_runs(out: Path, names: list[str], variant: str) -> list[tuple[str, dict]]:
    """``RUN`` or ``RUN:VARIANT`` (RUN an index into ``out``'s runs, -1 the last) as (what, {set: records})."""
    runs = json.loads(out.read_text(encoding="utf-8"))["runs"]
    got = []
    for name in names:
        i, _, v = name.partition(":")
        run, v = runs[int(i)], v or variant
        ready = run["variants"].get(v) or {}
        path = ready.get("answer_path") or ready.get("format")
        got.append((f"{run['date'][:16]} {v} ({path}, {run['machine'].get('cpu_model') or run['machine'].get('cpu')})",
                    {n: per[v] for n, per in run["records"].items() if per.get(v)}))
    return got


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
    ap.add_argument("--fit-calibration", nargs="+", default=None, metavar="RUN[:VARIANT]",
                    help="instead: fit the shown probabilities' calibration (--fit-form) on runs of --out (an index: "
                         "-1 the last), each run shown with what the others fit, then fitted on all of them")
    ap.add_argument("--fit-variant", default="now", help="--fit-calibration: the variant of a run named without one")
    ap.add_argument("--fit-form", choices=FORMS, default="lapse", help="--fit-calibration: what is fitted")
    ap.add_argument("--fit-check", nargs="*", default=[], metavar="RUN[:VARIANT]",
                    help="--fit-calibration: other runs (paths, machines) shown with what all the fitted ones fit "
                         "(an index from 0 where a variant is named: 7:main)")
    a = ap.parse_args(argv)
    if a.fit_calibration:
        print(fit_report(named_runs(a.out, a.fit_calibration, a.fit_variant),
                         named_runs(a.out, a.fit_check, a.fit_variant), a.fit_form))
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
