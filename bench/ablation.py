"""Ablations on real data, from one command.

    python -m bench.ablation --pdfs ../shared/unlp/pdfs --questions ../shared/unlp/questions.csv

Retrieval variants are scored on all questions without the answer model
(document accuracy, page proximity, recall of the gold page); passage-count
variants run the answer model on the first ``--answer-n`` questions. Writes
``bench/ablation.md`` and prints the table.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import sys
from pathlib import Path

from pipeline.backends.registry import Models
from pipeline.evaluation.questions import read_questions
from pipeline.evaluation.run import evaluate, index_folder
from pipeline.documents.ingest import list_pdfs
from pipeline.qa import Pipeline
from pipeline.settings import load_settings

RETRIEVAL = [
    ("default (hybrid, option reranker)", {}),
    ("reranker off", {"reranker": "none"}),
    ("dense only", {"retrieval": "dense"}),
    ("BM25 only", {"retrieval": "bm25"}),
    ("no options in the query", {"query_with_options": False}),
    ("BM25 on pymorphy3 lemmas", {"lexical_norm": "lemma"}),
    ("no document prefix", {"use_prefix": False}),
]
# both scorers in one pass ("combined" computes the two)
ANSWER = [(name, {"scorer": "combined", **over}) for name, over in
          [("1 passage", {"top_k_answer": 1}), ("2 passages (default)", {}), ("3 passages", {"top_k_answer": 3}),
           ("2 passages + each one's next chunk", {"neighbours": True}),
           ("2 passages, retry with 4 when best p < 0.5", {"retry_below": 0.5})]]


def run(args) -> str:
    questions, _ = read_questions(args.questions.read_bytes())
    pdfs = list_pdfs(args.pdfs)
    models = None
    pipes: dict[str, Pipeline] = {}

    def pipe_for(over: dict) -> Pipeline:
        nonlocal models
        s = load_settings(args.profile, **over)
        if models is None:
            models = Models(s)
        key = s.fingerprint()
        root = args.data_dir / key
        p = Pipeline(s, root=root, models=models)
        if key not in pipes:
            index_folder(p.library, pdfs, say=lambda m: None)
            pipes[key] = p
        return p

    lines = ["| variant | doc acc | page prox | R@1 | R@5 | R@20 |", "|---|---|---|---|---|---|"]
    for name, over in RETRIEVAL:
        m, _ = evaluate(pipe_for(over), questions, answer=False)
        lines.append(f"| {name} | {m['doc_accuracy']:.3f} | {m['page_proximity']:.3f} | {m['recall@1_rerank']:.3f} "
                     f"| {m['recall@5_rerank']:.3f} | {m['recall@20_rerank']:.3f} |")
        print(lines[-1], flush=True)
    out = [f"# Ablations — {datetime.date.today()}, {platform.machine()} {args.cpus} cores, profile {args.profile or 'cpu'}",
           "", f"Written by `python -m bench.ablation {args.argv}`. Exploratory runs made while choosing the "
           "defaults: [ablation-exploratory.md](ablation-exploratory.md).",
           "", f"Retrieval, all {len(questions)} questions, no answer model (page proximity = the metric's page term; "
           "R@k = the gold page within the top k after reranking):", ""]
    out += lines
    if args.answer_n:
        step = max(1, len(questions) // args.answer_n)  # spread over the whole file (and so over domains)
        qs = questions[::step][: args.answer_n]
        rows = ["| variant | score (combined) | answer acc (option) | answer acc (letter) | doc acc | page prox "
                "| s/question p50 |", "|---|---|---|---|---|---|---|"]
        for name, over in ANSWER:
            m, traces = evaluate(pipe_for(over), qs, answer=True)
            acc = {k: sum(max(t[f"{k}_probs"], key=t[f"{k}_probs"].get) == t["gold"]["answer"]
                          for t in traces if t.get(f"{k}_probs")) / len(qs) for k in ("option", "letter")}
            secs = sorted(t["seconds"] for t in traces)
            rows.append(f"| {name} | {m['score']:.3f} | {acc['option']:.3f} | {acc['letter']:.3f} | "
                        f"{m['doc_accuracy']:.3f} | {m['page_proximity']:.3f} | {secs[len(secs) // 2]:.1f} |")
            print(rows[-1], flush=True)
        out += ["", f"End to end, {len(qs)} questions (every {step}th of the file; answer model: "
                    "Qwen2.5-Coder-1.5B Q4_K_M; both scorers computed on every question):", ""] + rows
    return "\n".join(out) + "\n"


def main() -> None:
    import os

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--profile", default=None)
    ap.add_argument("--data-dir", type=Path, default=Path("data/ablation"))
    ap.add_argument("--answer-n", type=int, default=0, help="questions for the passage-count variants (0 = skip)")
    ap.add_argument("--out", type=Path, default=Path("bench/ablation.md"))
    args = ap.parse_args()
    args.cpus = os.cpu_count()
    args.argv = " ".join(sys.argv[1:])
    text = run(args)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
