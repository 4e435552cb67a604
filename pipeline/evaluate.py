"""Stage 7 — batch evaluation in the competition's format.

    python -m pipeline.evaluate --pdfs DIR --questions CSV --out DIR [--profile NAME]

Writes ``submission.csv`` (Question_ID, Correct_Answer, Doc_ID, Page_Num),
``metrics.json`` (with gold columns) and ``trace.jsonl``. Never reads
``Domain`` or ``N_Pages`` to predict. A question that fails (e.g. a model
server down) gets its error in ``trace.jsonl``, an empty answer in
``submission.csv`` and is counted in ``metrics.json`` (``failed``); the run goes on.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

from .answer import LETTERS
from .ingest import IngestError, check_size
from .qa import Pipeline, evidence_page
from .remote import BackendTimeout
from .settings import load_settings
from .types import Candidate, Question

log = logging.getLogger(__name__)

REQUIRED = ["Question_ID", "Question", *LETTERS]
GOLD = ["Correct_Answer", "Doc_ID", "Page_Num"]
MAX_CELL = 5000  # characters; a longer cell is cut (with a note)
MAX_PROBLEMS = 50  # notes returned; the rest are counted
_NOT_TEXT = {b"PK\x03\x04": "a ZIP archive or an Excel .xlsx workbook", b"\xd0\xcf\x11\xe0": "an Excel .xls workbook",
             b"%PDF": "a PDF", b"\x89PNG": "a PNG image", b"\xff\xd8\xff": "a JPEG image"}


class QuestionsError(ValueError):
    """A questions file that cannot be used; the message is meant for the user."""


def decode(data: bytes) -> tuple[str, list[str]]:
    """The text of a questions file: UTF-8 (BOM or not), UTF-16 (BOM, or plainly so), else Windows-1251."""
    if not data.strip():
        raise QuestionsError("the questions file is empty")
    for magic, what in _NOT_TEXT.items():
        if data.startswith(magic):
            raise QuestionsError(f"the questions file is not CSV text but {what}: save it as CSV (UTF-8) first")
    notes: list[str] = []
    half = len(data) // 2
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        text = data.decode("utf-16", errors="replace")
    elif half and data[1::2].count(0) > half // 2:  # ASCII-heavy UTF-16 without a BOM
        text = data.decode("utf-16-le", errors="replace")
    elif half and data[0::2].count(0) > half // 2:
        text = data.decode("utf-16-be", errors="replace")
    else:
        text = data.decode("utf-8", errors="replace")
        bad = text.count("\ufffd")
        high = len(data) - len(data.translate(None, bytes(range(128))))  # bytes >= 0x80
        if bad and bad * 20 > high:  # mostly not UTF-8: Windows-1251
            text = data.decode("cp1251", errors="replace")
        elif bad:
            notes.append(f"{bad} byte(s) that are not UTF-8 were replaced by \ufffd")
    text = text.lstrip("\ufeff")
    if not text.strip():
        raise QuestionsError("the questions file is empty")
    controls = sum(1 for ch in text[:100_000] if ch < " " and ch not in "\t\r\n")
    if controls > len(text[:100_000]) // 100:
        raise QuestionsError("the questions file is not text (it looks binary): expected a CSV file")
    return text, notes


def _delimiter(first_line: str) -> str:
    """Comma, semicolon or tab: whichever splits the header into the most known column names."""
    known = {c.casefold() for c in REQUIRED + GOLD}
    return max((",", ";", "\t"),
               key=lambda d: sum(f.strip().casefold() in known for f in next(csv.reader([first_line], delimiter=d))))


def _short(s: str, n: int = 40) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _page(s: str) -> int | None:
    try:
        return int(float(s))  # "4" or Excel's "4.0"
    except (ValueError, OverflowError):
        return None


def read_questions(data: bytes | str, max_questions: int | None = None) -> tuple[list[Question], list[str]]:
    """Questions from a competition-format CSV, and notes on what was skipped or changed.

    Columns ``Question_ID, Question, A–F`` are required (any order, any case; others are ignored;
    ``Correct_Answer, Doc_ID, Page_Num`` are read as gold); comma, semicolon or tab separated.
    A file that cannot be used at all — or holds more than ``max_questions`` questions
    (``settings.max_questions``) — raises :class:`QuestionsError`; bad rows are skipped with a note.
    """
    text, problems = decode(data) if isinstance(data, bytes) else (data.lstrip("\ufeff"), [])
    reader = csv.reader(io.StringIO(text), delimiter=_delimiter(text.split("\n", 1)[0]))
    try:
        header = [h.strip() for h in next(reader, [])]
        canon = {c.casefold(): c for c in REQUIRED + GOLD}
        col: dict[str, int] = {}
        for i, h in enumerate(header):
            col.setdefault(canon.get(h.casefold(), h), i)
        missing = [c for c in REQUIRED if c not in col]
        if missing:
            found = ", ".join(_short(h, 30) for h in header[:20] if h) or "nothing"
            raise QuestionsError(f"the questions file lacks the column(s) {', '.join(missing)} (found: {found}); "
                                 f"expected Question_ID, Question, A, B, C, D, E, F, and for scoring "
                                 f"Correct_Answer, Doc_ID, Page_Num")
        extra = [h for h in header if len(h) == 1 and h.upper() > "F" and h.isalpha()]
        if extra:
            problems.append(f"column(s) {', '.join(extra)} ignored: a question has six options, A–F")
        used = [(c, i) for c, i in col.items() if c in REQUIRED + GOLD]
        questions: list[Question] = []
        seen: dict[str, int] = {}
        line = reader.line_num + 1
        for row in reader:
            n, line = line, reader.line_num + 1  # a quoted cell may span lines
            if not any(c.strip() for c in row):
                continue
            get = {c: (row[i].strip() if i < len(row) else "") for c, i in used}
            qid = get["Question_ID"]
            where = f"line {n} (Question_ID {_short(qid)})" if qid else f"line {n}"
            long = [c for c, v in get.items() if len(v) > MAX_CELL]
            if long:
                problems.append(f"{where}: {', '.join(long)} cut to {MAX_CELL} characters")
                get.update({c: get[c][:MAX_CELL] for c in long})
            options = [get[L] for L in LETTERS]
            if not qid:
                problems.append(f"{where}: no Question_ID — skipped")
            elif not get["Question"]:
                problems.append(f"{where}: the question is empty — skipped")
            elif qid in seen:
                problems.append(f"{where}: this Question_ID is already used on line {seen[qid]} — skipped")
            elif sum(1 for o in options if o) < 2:
                problems.append(f"{where}: fewer than two non-empty options — skipped")
            else:
                seen[qid] = n
                gold = get.get("Correct_Answer", "").upper()
                gold = gold if len(gold) == 1 and gold in LETTERS else None
                questions.append(Question(qid, get["Question"], options, gold, get.get("Doc_ID") or None,
                                          _page(get.get("Page_Num", ""))))
    except csv.Error as e:
        raise QuestionsError(f"the questions file is not valid CSV at line {reader.line_num}: {e}") from None
    if not questions:
        raise QuestionsError("the questions file has no usable question: " + "; ".join(problems[:3])
                             if problems else "the questions file has a header but no questions")
    if max_questions is not None and len(questions) > max_questions:
        raise QuestionsError(f"the questions file has {len(questions):,} questions, more than the {max_questions:,} "
                             f"allowed in one run: split it, or raise the limit (PDFQA_MAX_QUESTIONS)")
    if len(problems) > MAX_PROBLEMS:
        problems = problems[:MAX_PROBLEMS] + [f"… and {len(problems) - MAX_PROBLEMS:,} more"]
    return questions, problems


def page_proximity(pred_doc, pred_page, gold_doc, gold_page, n_pages) -> float:
    if pred_doc != gold_doc or pred_page is None or gold_page is None or not n_pages:
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
            check_size(f.name, f.stat().st_size, pipe.library.settings.max_upload_mb)
            info = pipe.add_pdf(f.read_bytes(), f.name)
            report["indexed"].append(info.name)
            say(f"[{i}/{len(files)}] {f.name}: {'already indexed' if info.duplicate else f'{info.n_pages} pages, {info.n_chunks} chunks'}")
        except Exception as e:  # a bad file, an unreadable one, or a model server failing: this file only
            msg = str(e) if isinstance(e, IngestError) else f"{f.name}: {type(e).__name__}: {e}"
            if not isinstance(e, (IngestError, OSError)):
                log.warning("indexing %s failed", f.name, exc_info=True)
            report["failed"][f.name] = msg
            say(f"[{i}/{len(files)}] {f.name}: FAILED — {msg}")
    report["seconds"] = time.perf_counter() - t0
    return report


def _cand(c: Candidate) -> dict:
    return {"rank": c.rank, "chunk_id": c.chunk.chunk_id, "doc": c.chunk.doc_name, "pages": c.chunk.pages,
            "scores": {k: round(v, 5) for k, v in c.scores.items() if isinstance(v, float)}}


def _predict(pipe: Pipeline, q: Question, rec: dict, answer: bool) -> None:
    """Fill ``rec`` for one question; what is found before a failure stays in it."""
    retrieved, reranked, timings = pipe.retrieve(q)
    top = reranked[0] if reranked else None
    rec.update(answer="", probabilities={}, doc=top.chunk.doc_name if top else None,
               page=evidence_page(top, q, None) if top else None, timings=timings,
               candidates=[_cand(c) for c in reranked])
    if q.gold_doc:
        rec["gold"] = {"answer": q.gold_answer, "doc": q.gold_doc, "page": q.gold_page}
        rec["gold_rank"] = {"retrieval": gold_rank(retrieved, q), "rerank": gold_rank(reranked, q)}
    if answer:
        a = pipe.answer(q, retrieved, reranked, timings)
        rec.update(answer=a.letter, probabilities=a.probabilities, doc=a.doc_name, page=a.page,
                   letter_probs=a.details["letter"], option_probs=a.details["option"],
                   prompt_tokens=a.details["prompt_tokens"], retried=a.details["retried"],
                   evidence=[c.chunk.chunk_id for c in a.evidence])
        rec.update({k: a.details[k] for k in ("features", "not_in_documents", "not_in_documents_score",
                                              "flag_features") if k in a.details})


def evaluate(pipe: Pipeline, questions: list[Question], out: Path | None = None, answer: bool = True,
             progress: Callable[[int, int, dict], None] | None = None,
             give_up_after: int = 3) -> tuple[dict, list[dict]]:
    """Predict every question; a question that fails is recorded as failed, the batch goes on.

    A failed question keeps what was found before the failure (the retrieved document and page when
    only the answer model failed) and its trace gets ``error``. After ``give_up_after`` questions in a
    row time out on a model server, the rest are not tried: each is recorded as failed with that
    timeout's message (``not_tried``), so a dead server costs a few timeouts, not one per question.
    """
    n_pages = {d.name: d.n_pages for d in pipe.library.documents()}
    rows, traces = [], []
    live = None
    if out:  # the trace grows as the run goes, so a long run can be followed (and survives a crash)
        out.mkdir(parents=True, exist_ok=True)
        live = open(out / "trace.jsonl", "w", encoding="utf-8")
    ks = (1, 2, 5, 20)
    timeouts, down = 0, ""
    for i, q in enumerate(questions, 1):
        t0 = time.perf_counter()
        rec: dict = {"Question_ID": q.qid}
        if down:
            rec.update(error=down, not_tried=True)
        else:
            try:
                _predict(pipe, q, rec, answer)
                timeouts = 0
            except Exception as e:  # one failed question never stops the batch
                rec["error"] = f"{type(e).__name__}: {e}"
                timeouts = timeouts + 1 if isinstance(e, BackendTimeout) else 0
                if timeouts >= give_up_after:
                    down = f"{rec['error']} (not tried: {timeouts} questions in a row timed out on it)"
        rec["seconds"] = time.perf_counter() - t0
        traces.append(rec)
        if live:
            live.write(json.dumps(rec, ensure_ascii=False) + "\n")
            live.flush()
        rows.append({"Question_ID": q.qid, "Correct_Answer": rec.get("answer", ""), "Doc_ID": rec.get("doc") or "",
                     "Page_Num": rec.get("page") or ""})
        if progress:
            progress(i, len(questions), rec)
    result: dict = {"n_questions": len(questions), "failed": sum("error" in t for t in traces),
                    "not_tried": sum("not_tried" in t for t in traces)}
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
        questions, problems = read_questions(a.questions.read_bytes(), settings.max_questions)
        pdfs = [p for p in a.pdfs.iterdir() if p.suffix.lower() == ".pdf"]
    except (QuestionsError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    questions = questions[: a.limit] if a.limit else questions
    pipe = Pipeline(settings, root=a.data_dir)
    report = index_folder(pipe, pdfs)
    print(f"indexed {len(report['indexed'])} PDFs in {report['seconds']:.1f}s, {len(report['failed'])} failed")

    def show(i, n, rec):
        ok = ""
        if "gold" in rec:
            g = rec["gold"]
            ok = f" {'✓' if rec.get('answer') == g['answer'] else '✗'}{'D' if rec.get('doc') == g['doc'] else 'd'}"
        failed = f" FAILED — {rec['error']}" if "error" in rec else ""
        print(f"[{i}/{n}] {rec['Question_ID']}: {rec.get('answer') or '-'} {rec.get('doc') or '-'} "
              f"p{rec.get('page')}{ok} {rec['seconds']:.1f}s{failed}", flush=True)

    result, _ = evaluate(pipe, questions, a.out, answer=not a.no_answer, progress=show)
    result["indexing"] = {"pdfs": len(report["indexed"]), "failed": report["failed"], "seconds": report["seconds"]}
    result["settings"] = json.loads(settings.model_dump_json())
    (a.out / "metrics.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(json.dumps({k: v for k, v in result.items() if k not in ("settings", "indexing")}, indent=2))
    if result["failed"]:
        print(f"warning: {result['failed']} of {len(questions)} questions failed (see trace.jsonl)", file=sys.stderr)
    return 1 if questions and result["failed"] == len(questions) else 0


if __name__ == "__main__":
    sys.exit(main())
