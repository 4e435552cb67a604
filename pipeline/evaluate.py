"""Stage 7 — batch evaluation in the competition's format.

    python -m pipeline.evaluate --pdfs DIR --questions CSV --out DIR [--profile NAME]

Writes ``submission.csv`` (Question_ID, Correct_Answer, Doc_ID, Page_Num),
``metrics.json`` (with gold columns) and ``trace.jsonl``. Never reads
``Domain`` or ``N_Pages`` to predict.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Iterable

from .answer import LETTERS
from .ingest import IngestError
from .qa import Pipeline, evidence_page
from .settings import load_settings
from .types import Candidate, Question

REQUIRED = ["Question_ID", "Question", "A", "B", "C", "D", "E", "F"]
GOLD = ["Correct_Answer", "Doc_ID", "Page_Num"]


class QuestionsError(ValueError):
    """A questions file that cannot be used; the message is meant for the user."""


def decode(data: bytes) -> str:
    for enc in ("utf-8-sig", "cp1251"):
        try:
            return data.decode(enc)
        except UnicodeDecodeError:
            continue
    raise QuestionsError("the questions file is neither UTF-8 nor Windows-1251 text")


def read_questions(data: bytes | str, max_rows: int = 100_000) -> tuple[list[Question], list[str]]:
    """Questions from competition-format CSV; bad rows are skipped and reported, never fatal."""
    text = decode(data) if isinstance(data, bytes) else data.lstrip("\ufeff")
    try:
        reader = csv.DictReader(io.StringIO(text))
        header = [h.strip() for h in (reader.fieldnames or [])]
    except csv.Error as e:
        raise QuestionsError(f"the questions file is not valid CSV ({e})") from None
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise QuestionsError(f"the questions file lacks the column(s): {', '.join(missing)}")
    questions, problems = [], []
    for n, row in enumerate(reader, 2):
        if len(questions) >= max_rows:
            problems.append(f"more than {max_rows} questions: the rest were not read")
            break
        row = {(k or "").strip(): (v or "").strip() if isinstance(v, str) else "" for k, v in row.items()}
        qid, text = row.get("Question_ID", ""), row.get("Question", "")
        options = [row.get(L, "") for L in LETTERS]
        if not qid or not text:
            problems.append(f"line {n}: empty question id or question text — skipped")
            continue
        if sum(1 for o in options if o) < 2:
            problems.append(f"line {n} (question {qid}): fewer than two non-empty options — skipped")
            continue
        gold = row.get("Correct_Answer", "").upper()
        page = row.get("Page_Num", "")
        questions.append(Question(qid, text, options, gold if len(gold) == 1 and gold in LETTERS else None,
                                  row.get("Doc_ID") or None, int(page) if page.isdigit() else None))
    return questions, problems


def page_proximity(pred_doc, pred_page, gold_doc, gold_page, n_pages) -> float:
    if pred_doc != gold_doc or pred_page is None or not n_pages:
        return 0.0
    return max(0.0, 1.0 - abs(pred_page - gold_page) / n_pages)


def metrics(rows: list[dict]) -> dict:
    """The competition's score and its parts over rows with pred_* and gold_* keys."""
    n = len(rows)
    if not n:
        return {}
    ans = sum(r["pred_answer"] == r["gold_answer"] for r in rows) / n
    doc = sum(r["pred_doc"] == r["gold_doc"] for r in rows) / n
    page = sum(page_proximity(r["pred_doc"], r["pred_page"], r["gold_doc"], r["gold_page"], r["gold_n_pages"])
               for r in rows) / n
    return {"n": n, "score": 0.5 * ans + 0.25 * doc + 0.25 * page, "answer_accuracy": ans,
            "doc_accuracy": doc, "page_proximity": page}


def gold_rank(cands: list[Candidate], q: Question) -> int | None:
    for i, c in enumerate(cands, 1):
        if c.chunk.doc_name == q.gold_doc and q.gold_page in c.chunk.pages:
            return i
    return None


def index_folder(pipe: Pipeline, pdfs: Iterable[Path], say: Callable[[str], None] = print) -> dict:
    """Add every PDF; a bad one is reported and skipped, never stops the batch."""
    report = {"indexed": [], "failed": {}, "seconds": 0.0}
    t0 = time.perf_counter()
    files = sorted(pdfs)
    for i, f in enumerate(files, 1):
        try:
            info = pipe.add_pdf(f.read_bytes(), f.name)
            report["indexed"].append(info.name)
            say(f"[{i}/{len(files)}] {f.name}: {'already indexed' if info.duplicate else f'{info.n_pages} pages, {info.n_chunks} chunks'}")
        except (IngestError, OSError) as e:
            report["failed"][f.name] = str(e)
            say(f"[{i}/{len(files)}] {f.name}: FAILED — {e}")
    report["seconds"] = time.perf_counter() - t0
    return report


def _cand(c: Candidate) -> dict:
    return {"rank": c.rank, "chunk_id": c.chunk.chunk_id, "doc": c.chunk.doc_name, "pages": c.chunk.pages,
            "scores": {k: round(v, 5) for k, v in c.scores.items() if isinstance(v, float)}}


def evaluate(pipe: Pipeline, questions: list[Question], out: Path | None = None, answer: bool = True,
             progress: Callable[[int, int, dict], None] | None = None) -> tuple[dict, list[dict]]:
    """Predict every question; a question that fails is recorded as failed, the batch goes on."""
    n_pages = {d.name: d.n_pages for d in pipe.library.documents()}
    rows, traces = [], []
    live = None
    if out:  # the trace grows as the run goes, so a long run can be followed (and survives a crash)
        out.mkdir(parents=True, exist_ok=True)
        live = open(out / "trace.jsonl", "w", encoding="utf-8")
    ks = (1, 2, 5, 20)
    for i, q in enumerate(questions, 1):
        t0 = time.perf_counter()
        rec: dict = {"Question_ID": q.qid}
        try:
            if answer:
                a = pipe.ask(q)
                retrieved, reranked = a.details["retrieved"], a.candidates
                letter, probs, doc, page, timings = a.letter, a.probabilities, a.doc_name, a.page, a.timings
                rec.update(letter_probs=a.details["letter"], option_probs=a.details["option"],
                           prompt_tokens=a.details["prompt_tokens"], retried=a.details["retried"],
                           evidence=[c.chunk.chunk_id for c in a.evidence])
            else:
                retrieved, reranked, timings = pipe.retrieve(q)
                letter, probs = "", {}
                top = reranked[0] if reranked else None
                doc, page = (top.chunk.doc_name, evidence_page(top, q, None)) if top else (None, None)
            rec.update(answer=letter, probabilities=probs, doc=doc, page=page, timings=timings,
                       candidates=[_cand(c) for c in reranked])
            if q.gold_doc:
                rec["gold"] = {"answer": q.gold_answer, "doc": q.gold_doc, "page": q.gold_page}
                rec["gold_rank"] = {"retrieval": gold_rank(retrieved, q), "rerank": gold_rank(reranked, q)}
        except Exception as e:  # one failed question never stops the batch
            letter, doc, page = "", None, None
            rec["error"] = f"{type(e).__name__}: {e}"
        rec["seconds"] = time.perf_counter() - t0
        traces.append(rec)
        if live:
            live.write(json.dumps(rec, ensure_ascii=False) + "\n")
            live.flush()
        rows.append({"Question_ID": q.qid, "Correct_Answer": letter, "Doc_ID": doc or "", "Page_Num": page or ""})
        if progress:
            progress(i, len(questions), rec)
    result: dict = {"n_questions": len(questions), "failed": sum("error" in t for t in traces)}
    gold = [(q, t) for q, t in zip(questions, traces) if q.gold_doc]
    if gold:
        m = metrics([{"pred_answer": t.get("answer"), "gold_answer": q.gold_answer, "pred_doc": t.get("doc"),
                      "gold_doc": q.gold_doc, "pred_page": t.get("page"), "gold_page": q.gold_page,
                      "gold_n_pages": n_pages.get(q.gold_doc, 0)} for q, t in gold])
        if not answer:
            m.pop("answer_accuracy")
            m.pop("score")
        result.update(m)
        for stage in ("retrieval", "rerank"):
            for k in ks:
                result[f"recall@{k}_{stage}"] = sum(
                    1 for _, t in gold if (t.get("gold_rank") or {}).get(stage) and t["gold_rank"][stage] <= k) / len(gold)
    secs = sorted(t["seconds"] for t in traces)
    if secs:
        result["p50_seconds"] = secs[len(secs) // 2]
        result["p95_seconds"] = secs[min(len(secs) - 1, int(0.95 * len(secs)))]
    if live:
        live.close()
        write_outputs(out, rows, traces, result)
    return result, traces


def write_outputs(out: Path, rows: list[dict], traces: list[dict], result: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "submission.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["Question_ID", "Correct_Answer", "Doc_ID", "Page_Num"])
        w.writeheader()
        w.writerows(rows)
    with open(out / "trace.jsonl", "w", encoding="utf-8") as f:
        for t in traces:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    (out / "metrics.json").write_text(json.dumps(result, indent=2))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.evaluate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path, required=True, help="folder of PDFs (file name = Doc_ID)")
    ap.add_argument("--questions", type=Path, required=True, help="questions CSV in the competition format")
    ap.add_argument("--out", type=Path, required=True, help="folder for submission.csv, metrics.json, trace.jsonl")
    ap.add_argument("--profile", default=None, help="settings profile (default: cpu)")
    ap.add_argument("--data-dir", type=Path, default=None, help="where the index lives (default: <data_dir>/library)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions")
    ap.add_argument("--no-answer", action="store_true", help="retrieval and localisation only (no LLM)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    a = ap.parse_args(argv)
    overrides = dict(kv.split("=", 1) for kv in a.set)
    settings = load_settings(a.profile, **overrides)
    try:
        questions, problems = read_questions(a.questions.read_bytes())
    except (QuestionsError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    questions = questions[: a.limit] if a.limit else questions
    pipe = Pipeline(settings, root=a.data_dir)
    report = index_folder(pipe, [p for p in a.pdfs.iterdir() if p.suffix.lower() == ".pdf"])
    print(f"indexed {len(report['indexed'])} PDFs in {report['seconds']:.1f}s, {len(report['failed'])} failed")

    def show(i, n, rec):
        ok = ""
        if "gold" in rec:
            g = rec["gold"]
            ok = f" {'✓' if rec.get('answer') == g['answer'] else '✗'}{'D' if rec.get('doc') == g['doc'] else 'd'}"
        print(f"[{i}/{n}] {rec['Question_ID']}: {rec.get('answer') or '-'} {rec.get('doc') or rec.get('error', '')} "
              f"p{rec.get('page')}{ok} {rec['seconds']:.1f}s", flush=True)

    result, _ = evaluate(pipe, questions, a.out, answer=not a.no_answer, progress=show)
    result["indexing"] = {"pdfs": len(report["indexed"]), "failed": report["failed"], "seconds": report["seconds"]}
    result["settings"] = json.loads(settings.model_dump_json())
    (a.out / "metrics.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(json.dumps({k: v for k, v in result.items() if k not in ("settings", "indexing")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
