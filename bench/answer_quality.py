"""Answer quality on CPU: per-option features, the combiner, calibration and the not-in-documents flag.

    # 1. one LLM pass per question, every feature group (resumable; JSONL, one line per question)
    python -m bench.answer_quality features --pdfs ../shared/unlp/pdfs --questions ../shared/unlp/questions.csv
    # 2. the same questions asked of a library WITHOUT their gold document (retrieval only, no LLM)
    python -m bench.answer_quality absent --pdfs ../shared/unlp/pdfs --questions ../shared/unlp/questions.csv
    # 3. grouped cross-validation, the fitted models (bench/results/fitted/answer.json; python -m fit ships them), the table and the diagram
    python -m bench.answer_quality fit --pdfs ../shared/unlp/pdfs --questions ../shared/unlp/questions.csv
    # or, after 2 alone: refit only the not-in-documents flag (no LLM features needed)
    python -m bench.answer_quality flag --pdfs ../shared/unlp/pdfs --questions ../shared/unlp/questions.csv
    # the flag for questions WITHOUT options (retrieved by the question alone: ``absent-free.jsonl``, ``flag_free``)
    python -m bench.answer_quality absent --free ...  &&  python -m bench.answer_quality flag --free ...
    # pipeline runs (``python -m pipeline.evaluate --out DIR``) on the same questions, compared with the first
    python -m bench.answer_quality runs --pdfs ../shared/unlp/pdfs --questions ../shared/unlp/questions.csv \
        --run runs/default --run runs/variant

The library is indexed once into ``--data-dir`` (default ``data/unlp``) and reused.
Questions are processed in the order of a hash of their ID, so a partial run is
a fair sample spread over all documents.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from pipeline.answering import flag
from pipeline.answering.answer import evidence_page
from pipeline.answering.features import GROUPS, llm_features, support_features
from pipeline.evaluation.questions import read_questions
from pipeline.evaluation.run import index_folder
from pipeline.qa import Pipeline
from pipeline.types import LETTERS, Question
from pipeline.settings import load_settings

FITTED = Path(__file__).resolve().parents[1] / "bench" / "results" / "fitted"  # python -m fit ships them


def ordered(questions):
    return sorted(questions, key=lambda q: hashlib.sha1(q.qid.encode()).hexdigest())


def _cands(cands, n=8):
    return [{"id": c.chunk.chunk_id, "doc": c.chunk.doc_name, "pages": c.chunk.pages,
             "scores": {k: round(v, 5) for k, v in c.scores.items() if isinstance(v, float)}} for c in cands[:n]]


def retrieval_record(pipe: Pipeline, q) -> tuple[dict, list, list]:
    t = time.perf_counter()
    reranked = list(pipe.search(q).reranked)
    evidence = pipe.evidence(reranked, pipe.settings.answer.top_k_answer)
    top = reranked[0]
    rec = {"qid": q.qid, "gold": {"answer": q.gold_answer, "doc": q.gold_doc, "page": q.gold_page},
           "doc": top.chunk.doc_name, "pages_by_letter": [evidence_page(top, q, L) for L in LETTERS[:len(q.options)]],
           "evidence": [c.chunk.chunk_id for c in evidence], "evidence_docs": [c.chunk.doc_name for c in evidence],
           "candidates": _cands(reranked), "flag": flag.flag_features(pipe.library, q, reranked, evidence),
           "seconds": {"retrieve": time.perf_counter() - t}}
    return rec, reranked, evidence


def open_pipe(args, root: Path) -> Pipeline:
    pipe = Pipeline(load_settings(args.profile), root=root)
    if pipe.library.n_chunks() == 0:
        rep = index_folder(pipe.library, [p for p in args.pdfs.iterdir() if p.suffix.lower() == ".pdf"])
        print(f"indexed {len(rep['indexed'])} PDFs in {rep['seconds']:.0f}s", flush=True)
    return pipe


def cmd_features(args) -> None:
    questions = in_library(args, read_questions(args.questions.read_bytes())[0])
    groups = tuple(args.groups.split(","))
    if groups == ("neutral",):  # no passages: needs no library (can run while the library is being indexed)
        return neutral_only(args, questions)
    pipe = open_pipe(args, args.data_dir / "full")
    done = {r["qid"] for r in read_features(args.data_dir) if "candidates" in r}
    k, n = (int(x) for x in args.worker.split("/"))  # worker k of n takes every n-th question
    out = args.data_dir / (f"features.{k}.jsonl" if n > 1 else "features.jsonl")
    todo = [q for j, q in enumerate(ordered(questions)) if j % n == k and q.qid not in done][: args.limit or None]
    if args.reverse:  # a second process on the same share, from its end (they meet in the middle)
        todo, out = todo[::-1], out.with_suffix(".rev.jsonl")
    shifts = tuple(int(x) for x in args.shifts.split(","))
    ans = pipe.models.answerer
    print(f"{len(done)} done, {len(todo)} to go; groups {groups}, shifts {shifts}", flush=True)
    with open(out, "a", encoding="utf-8") as f:
        for i, q in enumerate(todo, 1):
            rec, reranked, evidence = retrieval_record(pipe, q)
            t = time.perf_counter()
            rec.update(support_features(pipe.library, q, evidence))
            rec["seconds"]["support"] = time.perf_counter() - t
            with ans.exclusive():
                feats, secs = llm_features(ans, q, evidence, groups, shifts)
            rec.update(feats)
            rec["seconds"].update(secs)
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            f.flush()
            opt = rec.get("option_mean") or [0] * 6
            best = LETTERS[int(np.argmax([x if x is not None else -1e9 for x in opt]))]
            print(f"[{i}/{len(todo)}] {q.qid} gold {q.gold_answer} option {best} "
                  + " ".join(f"{k} {v:.1f}s" for k, v in rec["seconds"].items()), flush=True)


def neutral_only(args, questions) -> None:
    from pipeline.backends.registry import Models

    ans = Models(load_settings(args.profile)).answerer
    out = args.data_dir / "features.neutral.jsonl"
    recs = read_features(args.data_dir)
    done = {r["qid"] for r in recs if "neutral_sum" in r}
    featured = {r["qid"] for r in recs if "candidates" in r}  # questions with the other groups go first
    todo = sorted([q for q in ordered(questions) if q.qid not in done], key=lambda q: q.qid not in featured)
    k, n = (int(x) for x in args.worker.split("/"))
    if n > 1:
        out = out.with_suffix(f".{k}.jsonl")
    with open(out, "a", encoding="utf-8") as f:
        for q in todo[k::n]:
            feats, secs = llm_features(ans, q, [], ("neutral",))
            f.write(json.dumps({"qid": q.qid, **feats, "seconds": secs}, ensure_ascii=False) + "\n")
            f.flush()
            print(q.qid, f"{secs['neutral']:.1f}s", flush=True)


def in_library(args, questions):
    """The questions whose gold document is in the indexed library (all of them once every PDF is indexed)."""
    import sqlite3

    db = args.data_dir / "full" / "library.sqlite"
    if not db.exists():
        return questions
    names = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM documents")}
    kept = [q for q in questions if q.gold_doc in names]
    if len(kept) < len(questions):
        print(f"{len(kept)} of {len(questions)} questions have their document in the library "
              f"({len(names)} documents)", flush=True)
    return kept


def read_features(data_dir: Path) -> list[dict]:
    """Every feature record written so far (``features.jsonl`` and the workers' ``features.K.jsonl``)."""
    recs = {}
    for p in sorted(data_dir.glob("features*.jsonl")):
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                if r["qid"] in recs:  # a record of other groups of the same question (e.g. neutral-only)
                    r = {**recs[r["qid"]], **r, "seconds": {**recs[r["qid"]]["seconds"], **r["seconds"]}}
                recs[r["qid"]] = r
    return list(recs.values())


def halves(names: list[str]) -> tuple[set, set]:
    """Documents split into two halves by a hash of their name."""
    a = {n for n in names if int(hashlib.sha1(n.encode()).hexdigest(), 16) % 2 == 0}
    return a, set(names) - a


def absent_file(args) -> str:
    return "absent-free.jsonl" if args.free else "absent.jsonl"


def cmd_absent(args) -> None:
    """Each question asked of the half of the library that lacks its gold document (retrieval only)."""
    questions = in_library(args, read_questions(args.questions.read_bytes())[0])
    if args.free:  # asked as a plain question (no options), as the free-form answer step asks it
        questions = [Question(q.qid, q.text, [], q.gold_answer, q.gold_doc, q.gold_page) for q in questions]
    full = open_pipe(args, args.data_dir / "full")
    names = [d.name for d in full.library.documents()]
    docs = {d.name: d.doc_hash for d in full.library.documents()}
    full.library.close()
    parts = halves(names)
    out = args.data_dir / absent_file(args)
    with open(out, "w", encoding="utf-8") as f:
        pipe = Pipeline(load_settings(args.profile), root=args.data_dir / "full", models=full.models)
        for q in questions:  # the same questions asked normally (retrieval only)
            rec, _, _ = retrieval_record(pipe, q)
            rec["library"] = "full"
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        pipe.library.close()
        print(f"asked {len(questions)} questions of the full library", flush=True)
        for k, keep in enumerate(parts):
            root = args.data_dir / f"half{k}"
            if not (root / "done").exists():  # a copy of the full library without the other half (no re-embedding)
                shutil.rmtree(root, ignore_errors=True)
                shutil.copytree(args.data_dir / "full", root)
                lib = Pipeline(load_settings(args.profile), root=root, models=full.models).library
                for n in set(names) - keep:
                    lib.remove(docs[n])
                lib.close()
                (root / "done").write_text("")
            pipe = Pipeline(load_settings(args.profile), root=root, models=full.models)
            asked = [q for q in questions if q.gold_doc not in keep]
            print(f"half {k}: {len(keep)} documents, {len(asked)} questions whose document is absent", flush=True)
            for q in asked:
                rec, _, _ = retrieval_record(pipe, q)
                rec["library"] = f"half{k}"
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            pipe.library.close()
    print(f"wrote {out}")


def cmd_flag(args) -> None:
    """Refit only the not-in-documents flag from ``absent.jsonl`` (retrieval only, no LLM features needed)."""
    from bench import answer_quality_fit as F

    recs = [json.loads(x) for x in (args.data_dir / absent_file(args)).read_text(encoding="utf-8").splitlines() if x]
    flag = F.flag_eval([r for r in recs if r["library"] == "full"], [r for r in recs if r["library"] != "full"],
                       F.FLAG_FREE if args.free else F.FLAG)
    from fit import write_fitted

    key = "flag_free" if args.free else "flag"
    args.weights = write_fitted(key, {key: flag["final"]}, f"{args.questions} ({len(recs)} retrieval records)",
                                f"python -m bench.answer_quality {args.argv}")
    print(f"{'flag_free' if args.free else 'flag'}: {flag['n_present']} present + {flag['n_absent']} absent questions; held-out ROC AUC "
          f"{flag['auc']:.3f}; fires on {flag['rate_present']:.3f} present / {flag['rate_absent']:.3f} absent; "
          "single features: " + ", ".join(f"{k} {v:.3f}" for k, v in flag["single"].items()))
    print(f"wrote {args.weights} ({key} only; ship it: python -m fit {args.weights})")


def cmd_fit(args) -> None:
    from bench import answer_quality_fit

    answer_quality_fit.run(args)


def cmd_runs(args) -> None:
    from bench import answer_quality_fit

    answer_quality_fit.runs(args)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.answer_quality", description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["features", "absent", "fit", "flag", "runs"])
    ap.add_argument("--pdfs", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--profile", default=None)
    ap.add_argument("--data-dir", type=Path, default=Path("data/unlp"))
    ap.add_argument("--limit", type=int, default=0, help="features: at most N more questions")
    ap.add_argument("--groups", default=",".join(GROUPS), help="features: LLM feature groups")
    ap.add_argument("--shifts", default="0,3", help="features: cyclic shifts of the lettered options")
    ap.add_argument("--reverse", action="store_true", help="features: this worker's questions in reverse order")
    ap.add_argument("--worker", default="0/1", help="features: K/N = this process takes every N-th question")
    ap.add_argument("--png", type=Path, default=None, help="runs: a reliability diagram of the runs, held-out")
    ap.add_argument("--free", action="store_true",
                    help="absent/flag: the questions without their options (the free-form flag, flag_free)")
    ap.add_argument("--weights", type=Path, default=FITTED / "answer.json",
                    help="fit: where the fitted models go (python -m fit ships them)")
    ap.add_argument("--out", type=Path, default=Path("bench/answer_quality.md"))
    ap.add_argument("--run", action="append", default=[],
                    help="runs: a pipeline.evaluate --out folder (repeat; the first is the baseline)")
    args = ap.parse_args(argv)
    args.argv = " ".join(sys.argv[1:])
    args.cpus = os.cpu_count()
    args.machine = platform.machine()
    args.date = datetime.date.today()
    {"features": cmd_features, "absent": cmd_absent, "fit": cmd_fit, "flag": cmd_flag, "runs": cmd_runs}[args.command](args)


if __name__ == "__main__":
    main()
