"""The batch command: six-option questions in the competition's format, or free-form questions.

    python -m pipeline.evaluate --pdfs DIR --questions CSV --out DIR [--profile NAME]

Six-option questions (``Question_ID, Question, A–F``): writes ``submission.csv``
(Question_ID, Correct_Answer, Doc_ID, Page_Num), ``metrics.json`` (with gold
columns) and ``trace.jsonl``. Never reads ``Domain`` or ``N_Pages`` to predict.
A CSV without option columns is free-form (``Question_ID, Question[, Answer,
Doc_ID, Page_Num]``; ``pipeline.evaluation.free``): ``submission.csv`` has
Question_ID, Answer, Doc_ID, Page_Num (an empty Answer: not found), and the
metrics are exact match, token F1 and abstention.

A question that fails (e.g. a model server down) gets its error in
``trace.jsonl``, an empty answer in ``submission.csv`` and is counted in
``metrics.json`` (``failed``); the run goes on.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import QuestionsError
from ..documents.ingest import list_pdfs
from ..backends.registry import answer_model_note
from ..qa import Pipeline
from ..settings import load_settings, parse_overrides
from .free import evaluate_free, is_free_form, read_free_questions
from .questions import read_questions
from .run import evaluate, index_folder


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.evaluate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path, required=True, help="folder of PDFs (file name = Doc_ID)")
    ap.add_argument("--questions", type=Path, required=True,
                    help="questions CSV: the competition format (Question_ID, Question, A–F[, Correct_Answer, Doc_ID, "
                         "Page_Num]) or free-form (Question_ID, Question[, Answer, Doc_ID, Page_Num])")
    ap.add_argument("--out", type=Path, required=True, help="folder for submission.csv, metrics.json, trace.jsonl")
    ap.add_argument("--profile", default=None, help="settings profile (default: cpu)")
    ap.add_argument("--data-dir", type=Path, default=None, help="where the index lives (default: <data_dir>/library)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions")
    ap.add_argument("--no-answer", action="store_true", help="retrieval and localisation only (no LLM)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    a = ap.parse_args(argv)
    settings = load_settings(a.profile, **parse_overrides(a.set))
    try:
        data = a.questions.read_bytes()
        free = is_free_form(data)
        if free and a.no_answer:
            raise QuestionsError("--no-answer is for six-option questions; this file has no option columns (A–F)")
        questions, problems = (read_free_questions if free else read_questions)(data, settings.limits.max_questions)
        pdfs = list_pdfs(a.pdfs)
    except (QuestionsError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    questions = questions[: a.limit] if a.limit else questions
    pipe = Pipeline(settings, root=a.data_dir)
    report = index_folder(pipe.library, pdfs)
    print(f"indexed {len(report['indexed'])} PDFs in {report['seconds']:.1f}s, {len(report['failed'])} failed")

    def show_free(i, n, rec):
        failed = f" FAILED — {rec['error']}" if "error" in rec else ""
        print(f"[{i}/{n}] {rec['Question_ID']}: {rec['answer'] or '(not found)'} | {rec.get('doc') or '-'} "
              f"p{rec.get('page')} {rec['seconds']:.1f}s{failed}", flush=True)

    def show(i, n, rec):
        ok = ""
        if "gold" in rec:
            g = rec["gold"]
            ok = f" {'✓' if rec.get('answer') == g['answer'] else '✗'}{'D' if rec.get('doc') == g['doc'] else 'd'}"
        failed = f" FAILED — {rec['error']}" if "error" in rec else ""
        print(f"[{i}/{n}] {rec['Question_ID']}: {rec.get('answer') or '-'} {rec.get('doc') or '-'} "
              f"p{rec.get('page')}{ok} {rec['seconds']:.1f}s{failed}", flush=True)

    extra = {"indexing": {"pdfs": len(report["indexed"]), "failed": report["failed"], "seconds": report["seconds"]},
             "settings": json.loads(settings.model_dump_json()), "answer_model": answer_model_note(settings)}
    if free:
        result, _ = evaluate_free(pipe, questions, a.out, progress=show_free, extra=extra)
    else:
        result, _ = evaluate(pipe, questions, a.out, answer=not a.no_answer, progress=show, extra=extra)
    print(json.dumps({k: v for k, v in result.items() if k not in ("settings", "indexing")}, indent=2))
    if result["failed"]:
        print(f"warning: {result['failed']} of {len(questions)} questions failed (see trace.jsonl)", file=sys.stderr)
    return 1 if questions and result["failed"] == len(questions) else 0


if __name__ == "__main__":
    sys.exit(main())
