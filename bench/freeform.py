"""Free-form questions: build the test set from a six-option CSV, then measure (one command each).

    python -m bench.freeform build --questions ../shared/unlp/questions.csv --pdfs ../shared/unlp/pdfs
    python -m bench.freeform run --every 6          # every 6th question: 29 answerable + 29 unanswerable
    python -m bench.freeform run                    # all 170 + 170

``build`` writes ``answerable.csv`` (the correct option's text as the gold
answer, with its Doc_ID and Page_Num) and ``unanswerable.csv`` (the same
questions, empty Answer, a ``Library`` column), and builds three libraries under
``--work``: ``lib-full`` (every PDF), ``lib-half-a`` and ``lib-half-b`` (the PDFs in
sorted order, alternately; built by copying the full library's chunks and
vectors, no re-embedding). Each unanswerable question is asked of the half
that lacks its gold document; the answerable ones of the full library.

``run`` answers the set with the full system and with each of its four ideas
switched off (hybrid retrieval, preceding passages, the k=10 retry, the
verification pass), plus the extractive mode. Every model reading is cached
in ``<work>/readings.jsonl`` by (question, passages): a run is resumable, and
variants that show the model the same passages reuse its reading (and its
measured seconds). Prints the table (with each row's paired F1 difference from the full
system's, and its 95% bootstrap interval) and writes it to ``<work>/table.md``.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np

from bench import harness
from pipeline.backends.registry import Models
from pipeline.evaluation.free import free_metrics, read_free_questions
from pipeline.evaluation.metric import percentile
from pipeline.evaluation.scoring import token_f1
from pipeline.evaluation.questions import read_questions
from pipeline.evaluation.run import index_folder
from pipeline.answering.freeform import ANSWERABLE_TAIL, Reading, free_reader, verify_tail
from pipeline.index import Library
from pipeline.qa import Pipeline
from pipeline.settings import load_settings
from pipeline.types import LETTERS, Question

HALVES = ("half-a", "half-b")
VARIANTS = [
    ("full system (generative)", {}),
    ("judgements asked where they do not decide (before issue 48)", {"free_judge_always": True}),
    ("before issue 48 (judgements always asked, first passages 420 + 160 tokens)",
     {"free_judge_always": True, "free_passage_tokens": 420, "free_preceding_tokens": 160}),
    ("retry extends the first passages (reads only those it adds)", {"free_retry_extends": True}),
    ("not-in-documents flag off (model judgements decide)", {"free_flag": False}),
    ("model judgements abstain too (flag on)", {"free_judge_with_flag": True}),
    ("forced answer at once (no retry first)", {"free_forced_after_retry": False}),
    ("hybrid retrieval off (dense only)", {"retrieval": "dense"}),
    ("preceding passage off", {"free_preceding": False}),
    ("retry with k=10 off", {"free_retry_top_k": 0}),
    ("verification off", {"free_verify": False}),
    ("verification abstains too (flag on)", {"free_judge_with_flag": True, "free_min_answerable": 0.0}),
    ("extractive instead of generative", {"free_mode": "extract"}),
    ("verbatim prompt (shortest words copied)", {"free_prompt": "verbatim"}),
]


# ---- build -------------------------------------------------------------------
def half_library(full: Path, root: Path, keep: set[str], settings, embedder) -> int:
    """A copy of the (closed) full library at ``root`` without the documents not in ``keep`` (no
    re-embedding; made once, marked by ``root/done``); returns its number of documents."""
    if not (root / "done").exists():
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(full, root)
        lib = Library(root, embedder, settings)
        for d in lib.documents():
            if d.doc_hash not in keep:
                lib.remove(d.doc_hash)
        lib.close()
        (root / "done").touch()
    lib = Library(root, None, settings)
    n = len(lib.documents())
    lib.close()
    return n


def build(a) -> None:
    questions, problems = read_questions(a.questions.read_bytes())
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    pdfs = sorted(p for p in a.pdfs.iterdir() if p.suffix.lower() == ".pdf")[: a.docs or None]
    half = {p.name: HALVES[i % 2] for i, p in enumerate(pdfs)}
    a.work.mkdir(parents=True, exist_ok=True)
    gold = [q for q in questions if q.gold_answer and q.gold_doc in half]
    with open(a.work / "answerable.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["Question_ID", "Question", "Answer", "Doc_ID", "Page_Num"])
        for q in gold:
            w.writerow([q.qid, q.text, q.options[LETTERS.index(q.gold_answer)], q.gold_doc, q.gold_page or ""])
    with open(a.work / "unanswerable.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["Question_ID", "Question", "Answer", "Library"])
        for q in gold:  # asked of the half without its gold document
            w.writerow([f"u{q.qid}", q.text, "", HALVES[1 - HALVES.index(half[q.gold_doc])]])
    print(f"{len(gold)} answerable + {len(gold)} unanswerable questions in {a.work}")
    settings = load_settings(a.profile)
    models = Models(settings)
    full = Pipeline(settings, root=a.work / "lib-full", models=models)
    report = index_folder(full.library, pdfs)
    print(f"full library: {len(report['indexed'])} PDFs ({report['seconds']:.0f}s), {len(report['failed'])} failed")
    names = {d.name: d.doc_hash for d in full.library.documents()}
    full.library.close()  # copied below: nothing may be writing to it
    for h in HALVES:
        keep = {names[n] for n, x in half.items() if x == h and n in names}
        print(f"{h}: {half_library(a.work / 'lib-full', a.work / f'lib-{h}', keep, settings, models.embedder)} PDFs")


# ---- run ---------------------------------------------------------------------
# a reading depends on the prompts: changing one makes new readings (old lines of the file are ignored)
def prompts_key(gen_tail: str, forced_tail: str) -> str:
    return hashlib.sha1("\x00".join([gen_tail, forced_tail, ANSWERABLE_TAIL, verify_tail("")]).encode()).hexdigest()[:8]


class ReadingCache:
    def __init__(self, path: Path, reader, extract: bool = True):
        self.path, self.reader, self.fresh, self.extract = path, reader, 0, extract
        # (question id, text, passages) of this question's first reading, while its answer is being made (``run``
        # clears it before each variant asks)
        self.last: tuple[str, str, list[str]] | None = None
        self.prompts = prompts_key(reader.gen_tail, reader.forced_tail)  # the reader's own asks
        self.items: dict[str, dict] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    d = json.loads(line)
                    self.items[d.pop("key")] = d

    def __call__(self, q: Question, passages: list[str], judge: bool = True) -> Reading:
        # readings without the yes/no judgements are kept apart from those with them: each variant's seconds are
        # those of the reading it needs
        parts = [self.prompts, str(self.extract), q.text, *passages] + ([] if judge else ["no-judgements"])
        key = hashlib.sha1("\x00".join(parts).encode()).hexdigest()
        if key not in self.items:
            # timed on the cache this reading meets in the app: cold for a question's first reading (not on the
            # prompt another variant's reading left cached); for its retry, the first reading's prompt, read
            # untimed here when that reading came from this file (``free_retry_extends`` reads only what it adds)
            a = self.reader.a
            a.forget()
            if self.last and self.last[:2] == (q.qid, q.text) and self.last[2] != passages:
                a.prefill([self.reader.prefix(q, self.last[2])])
            r = self.reader.read(q, passages, extract=self.extract, judge=judge)  # both modes from one reading
            self.items[key] = r.to_dict()
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"key": key, **r.to_dict()}, ensure_ascii=False) + "\n")
            self.fresh += 1
        self.last = (q.qid, q.text, list(passages))
        return Reading(**self.items[key])


def load_set(work: Path, every: int) -> list[tuple[Question, str, str]]:
    """(question, library, gold document) triples: every ``every``-th answerable question and its unanswerable
    copy (asked of the library without that document)."""
    ans, _ = read_free_questions((work / "answerable.csv").read_bytes())
    un, _ = read_free_questions((work / "unanswerable.csv").read_bytes())
    with open(work / "unanswerable.csv", encoding="utf-8") as f:
        lib_of = {r["Question_ID"]: r["Library"] for r in csv.DictReader(f)}
    out = []
    for qa_, qu in list(zip(ans, un))[::every]:
        out += [(qa_, "full", qa_.gold_doc), (qu, lib_of[qu.qid], qa_.gold_doc)]
    return out


class HeldOutFlag:
    """The not-in-documents flag for free-form questions, fitted without the question's document.

    The shipped ``flag_free`` weights were fitted on the same questions (``python -m bench.flag``); measuring with
    them would test on the training set. Here each question gets weights refitted, as ``bench.flag`` fits them
    (its threshold: at most ``bench.flag``'s target share of the training questions whose document is present
    fire), on the records of every other document (``paths``: ``bench.flag``'s records; only those asked
    without options are used)."""

    def __init__(self, paths: list[Path]):
        self.models = {}
        self.recs = [json.loads(x) for path in paths for x in path.read_text(encoding="utf-8").splitlines()
                     if x.strip()]
        self.recs = [r for r in self.recs if r.get("free", True) and r.get("family", "e5") == "e5"]

    def __call__(self, doc: str) -> dict:
        if doc not in self.models:
            from bench.flag import MODELS, SMALL_TARGETS, TARGETS, fit

            keep = [r for r in self.recs if r["doc"] != doc]
            self.models[doc] = {"flag_free": fit(keep, MODELS["flag_free"], TARGETS["flag_free"],
                                                 SMALL_TARGETS["flag_free"])}
        return self.models[doc]


def paired_f1_delta(rows: list[dict], base: list[dict], n_boot: int = 2000, seed: int = 0
                    ) -> tuple[float, float, float]:
    """Mean token-F1 difference of ``rows`` against ``base`` over the answerable questions both have a row for
    ("not found" counts as F1 0), with its 95% paired bootstrap interval (questions resampled)."""
    b = {r["qid"]: token_f1(r["pred"], r["gold"]) for r in base if r["gold"]}
    d = np.array([token_f1(r["pred"], r["gold"]) - b[r["qid"]] for r in rows if r["gold"] and r["qid"] in b])
    if not len(d):
        return float("nan"), float("nan"), float("nan")
    boot = d[np.random.default_rng(seed).integers(0, len(d), (n_boot, len(d)))].mean(axis=1)
    return float(d.mean()), float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))


GROUNDING = "not grounded"  # freeform.decide's reason when the grounding check discards an answer
FLAGGED = "the library seems not to hold it"  # freeform.not_found_reason: the flag fired, nothing was read


def not_found_causes(rows: list[dict]) -> dict[str, int]:
    """The answerable questions answered "not found", by what ended them: the flag (nothing read), the grounding
    check (its last try's answer discarded as not grounded), or the model (a refusal, a judgement); and
    ``discarded``: answerable questions where the grounding check discarded an answer on any try (a retry may
    have answered after it)."""
    ans = [r for r in rows if r["gold"]]
    out = {"flag": 0, "grounding": 0, "model": 0, "discarded": sum(bool(r.get("grounding_discards")) for r in ans)}
    for r in ans:
        if r["pred"]:
            continue
        why = " ".join(r.get("reasons") or [])
        out["flag" if FLAGGED in why else "grounding" if GROUNDING in why else "model"] += 1
    return out


def table(results: dict[str, list[dict]], head: str) -> str:
    """One line per variant; the first is the baseline of the paired F1 differences."""
    lines = [head, "",
             "| variant | F1 | F1 vs first row (95% CI) | EM | F1 when answered | \"not found\" on answerable "
             "| of them: flag / grounding check / model | grounding discards on answerable (any try) "
             "| abstention recall (unanswerable) | abstention precision | doc acc | page acc "
             "| p50 s (answerable / unanswerable) |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    base = next(iter(results.values()), [])

    def p50(rows: list[dict]) -> str:
        return f"{percentile([r['seconds'] for r in rows], 0.5):.1f}" if rows else "–"

    for i, (name, rows) in enumerate(results.items()):
        m = free_metrics(rows)
        d, lo, hi = paired_f1_delta(rows, base)
        delta = "–" if i == 0 else f"{d:+.3f} ({lo:+.3f} … {hi:+.3f})"
        c = not_found_causes(rows)
        lines.append(f"| {name} | {m.get('f1', 0):.3f} | {delta} | {m.get('exact_match', 0):.3f} | "
                     f"{m.get('f1_when_answered', 0):.3f} | {m.get('abstained_answerable', 0):.3f} | "
                     f"{c['flag']} / {c['grounding']} / {c['model']} | {c['discarded']} | "
                     f"{m.get('abstention_recall', 0):.3f} | {m.get('abstention_precision', float('nan')):.3f} | "
                     f"{m.get('doc_accuracy', 0):.3f} | {m.get('page_accuracy', 0):.3f} | "
                     f"{p50([r for r in rows if r['gold']])} / {p50([r for r in rows if not r['gold']])} |")
    return "\n".join(lines)


def run(a) -> str:
    """Question by question, every variant: a run stopped at any point leaves a table over the same questions."""
    items = load_set(a.work, a.every)
    flag_models = None
    paths = a.flag_records or [Path("data/flag/records-now-e5.jsonl")]
    if all(p.exists() for p in paths):
        flag_models = HeldOutFlag(paths)
    else:
        print(f"warning: {paths} not found: the shipped flag weights are used (fitted on these questions)",
              file=sys.stderr)
    base = load_settings(a.profile)
    models = Models(base)
    variants = [(n, o) for n, o in VARIANTS if not a.only or n in a.only]
    settings = {n: load_settings(a.profile, **o) for n, o in variants}
    pipes: dict[tuple, Pipeline] = {}
    caches: dict[str, ReadingCache] = {}  # by the answer's prompt (``free_prompt``); one file of readings
    results: dict[str, list[dict]] = {n: [] for n, _ in variants}
    started = harness.now()
    (a.work / "results").mkdir(exist_ok=True)
    log = open(a.work / "results" / f"rows-{a.tag}.jsonl", "w", encoding="utf-8")
    out = ""
    for i, (q, lib, doc) in enumerate(items, 1):
        for name, _ in variants:
            s = settings[name]
            key = (lib, name)
            if key not in pipes:
                pipes[key] = Pipeline(s, root=a.work / f"lib-{lib}", models=models)
            pipe = pipes[key]
            if s.free.free_prompt not in caches:
                reader = free_reader(pipe.models.answerer, pipe.settings)
                caches[s.free.free_prompt] = ReadingCache(a.work / "readings.jsonl", reader, extract=any(
                    settings[n].free.free_mode == "extract" for n, _ in variants))
            cache = caches[s.free.free_prompt]
            cache.last = None  # this variant's first reading of the question is timed cold
            ans = pipe.ask(q.without_options(), read=cache,
                           flag_model=flag_models(doc) if flag_models else None)
            t = ans.timings
            seconds = sum(t.values())  # model seconds as measured when each reading was made
            row = {"variant": name, "qid": q.qid, "pred": ans.text, "gold": q.gold_answer,
                   "pred_doc": ans.doc_name if ans.text else None, "gold_doc": q.gold_doc,
                   "pred_page": ans.page if ans.text else None, "gold_page": q.gold_page, "reasons": ans.reasons,
                   "seconds": seconds, "flag_score": ans.details.get("not_in_documents_score"),
                   "forced": ans.forced, "grounding_discards": sum(any(GROUNDING in x for x in t["reasons"])
                                                                   for t in ans.details.get("tries", [])),
                   "tries": [{"k": t["k"], "answer": t["reading"]["forced"] if t["forced"] else
                              t["reading"]["generated"], "generated": t["reading"]["generated"],
                              "forced": t["reading"]["forced"], "grounding": t["grounding"],
                              "reasons": t["reasons"]} for t in ans.details.get("tries", [])]}
            results[name].append(row)
            log.write(json.dumps(row, ensure_ascii=False) + "\n")
            log.flush()
            print(f"  {i}/{len(items)} [{name}] {q.qid}: {ans.text or '(not found)'} | gold: {q.gold_answer or '-'}"
                  f" | {seconds:.1f}s (new readings: {cache.fresh})", flush=True)
        n_ans = sum(1 for r in results[variants[0][0]] if r["gold"])
        head = (f"{n_ans} answerable + {i - n_ans} unanswerable questions: every {a.every}. question of "
                f"{a.work / 'answerable.csv'} ({len(items)} in the subset; {i} done)")
        stamp = harness.stamp("bench.freeform", a.argv)
        out = f"{stamp}\n\n{table(results, head)}\n"
        (a.work / "table.md").write_text(out, encoding="utf-8")
        if a.record:
            harness.record(a.record, summary(results, a, started, complete=i == len(items)))
    print(out)
    return out


def summary(results: dict[str, list[dict]], a, date: str, complete: bool) -> dict:
    """One run for ``--record`` (``bench/results/freeform.json``): its date, command, machine, and per variant its
    questions, metrics, p50/p95 seconds of the answerable and the unanswerable, and the paired F1 difference from
    the first variant with its 95% interval."""
    base = next(iter(results.values()), [])
    variants = {}
    for name, rows in results.items():
        secs = {k: [r["seconds"] for r in rows if bool(r["gold"]) == (k == "answerable")]
                for k in ("answerable", "unanswerable")}
        d, lo, hi = paired_f1_delta(rows, base)
        variants[name] = {"n": len(rows), **free_metrics(rows), "not_found_on_answerable_by": not_found_causes(rows),
                          **{f"{k}_{q}_s": percentile(v, p) if v else None
                             for k, v in secs.items() for q, p in (("p50", 0.5), ("p95", 0.95))},
                          "f1_vs_first": None if rows is base else [d, lo, hi]}
    return {"date": date, "command": harness.command("bench.freeform", a.argv), "machine": harness.machine(),
            "every": a.every, "complete": complete, "variants": variants}


def table_from_rows(a) -> str:
    """The table again from ``results/rows-*.jsonl`` (stopped or parallel runs), over the questions every variant did."""
    files = [a.work / "results" / f"rows-{t}.jsonl" for t in a.tags] if a.tags else \
        sorted((a.work / "results").glob("rows*.jsonl"))
    rows = [json.loads(x) for f in files for x in f.read_text(encoding="utf-8").splitlines() if x]
    by: dict[str, dict[str, dict]] = {}
    for r in rows:
        by.setdefault(r["variant"], {})[r["qid"]] = r
    done = set.intersection(*(set(v) for v in by.values()))
    results = {n: [r for q, r in v.items() if q in done] for n, v in by.items()}
    n_ans = sum(1 for r in next(iter(results.values())) if r["gold"])
    out = table(results, f"{n_ans} answerable + {len(done) - n_ans} unanswerable questions")
    print(out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.freeform", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write the free-form CSVs and build the libraries")
    b.add_argument("--questions", type=Path, default=Path("../shared/unlp/questions.csv"))
    b.add_argument("--pdfs", type=Path, default=Path("../shared/unlp/pdfs"))
    b.add_argument("--docs", type=int, default=0, help="only the first N PDFs in sorted order, and their questions "
                   "(0 = all)")
    r = sub.add_parser("run", help="measure the full system and each idea switched off")
    r.add_argument("--every", type=int, default=1, help="every k-th question (1 = all)")
    r.add_argument("--only", action="append", default=[], help="only this variant (repeatable)")
    r.add_argument("--flag-records", type=Path, action="append", default=[],
                   help="the flag's training records (repeatable; default bench.flag's data/flag/records-now-e5.jsonl): "
                        "each question's flag is refitted without its document")
    r.add_argument("--tag", default="all", help="rows go to <work>/results/rows-TAG.jsonl (table reads them all)")
    r.add_argument("--record", type=Path, default=None, help="add this run (metrics and p50 seconds per variant, the "
                   "machine) to a JSON file of runs, e.g. bench/results/freeform.json (rewritten after each question)")
    t = sub.add_parser("table", help="the table again from a run's results/rows.jsonl")
    t.add_argument("--tags", nargs="*", default=[], help="only these runs' rows (a later tag's row of the same "
                   "variant and question wins)")
    for p in (b, r, t):
        p.add_argument("--work", type=Path, default=Path("data/freeform"), help="where the CSVs and libraries live")
        p.add_argument("--profile", default=None)
    a = ap.parse_args(argv)
    a.argv = sys.argv[1:] if argv is None else argv
    {"build": build, "run": run, "table": table_from_rows}[a.cmd](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
