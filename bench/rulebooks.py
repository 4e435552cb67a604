"""Where the gold page is lost on real long rulebooks: retrieval, reranking or page choice (no answer model).

    python -m bench.rulebooks --data-dir data/rb                      # both sets, the cpu default
    python -m bench.rulebooks --data-dir data/rb --set chunk_tokens=256 --show-lost 20

Two sets: ``long`` — the questions of ``../shared/unlp-long`` over a library of its four rulebooks
*and* the 30 leaflets of ``../shared/unlp`` (34 documents, two domains); ``unlp`` — the leaflets'
170 questions over the leaflets alone. For every question the gold page is followed through the
stages the answer model never sees: its rank among the top ``top_k_retrieve`` after retrieval,
after option-aware reranking, and after page choice (``pipeline/search/pages.py``); each question
lost (gold page not among the ``top_k_answer`` passages read) is put where it was lost:

* ``not in top 20`` — retrieval never brought the gold page into the candidates;
* ``ranks 3-20 after reranking`` — among the candidates, but reranking left it below the passages read;
* ``moved out by page choice`` — among the passages read after reranking, pushed out by page choice.

It also prints page@1 (the page named from the top passage), document accuracy and page proximity.
Indexes are built once per chunking configuration (``Settings.fingerprint``) under ``--data-dir``
and reused; the long set's library starts as a copy of the leaflets' one (same fingerprint), so
the leaflets are embedded once. ``--show-lost N`` prints, for up to N lost questions per set, the
question, the gold page's text and what was read instead.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.answering.answer import evidence_page
from pipeline.backends.base import Embedder
from pipeline.backends.registry import Models
from pipeline.documents.ingest import list_pdfs
from pipeline.evaluation.metric import competition_score, gold_rank, page_proximity, percentile
from pipeline.evaluation.questions import read_questions
from pipeline.evaluation.run import index_folder
from pipeline.qa import Pipeline
from pipeline.search.pages import rescore_pages
from pipeline.search.rerank import rerank
from pipeline.settings import Settings, load_settings, parse_overrides
from pipeline.types import LETTERS, Candidate, Question

NOT_RETRIEVED = "not in top 20"
RERANK_LOW = "ranks 3-20 after reranking"
PAGE_OUT = "moved out by page choice"
READ = "in the passages read"
STAGES = [READ, NOT_RETRIEVED, RERANK_LOW, PAGE_OUT]


@dataclass
class Diagnosis:
    """One question's gold page through the stages."""

    qid: str
    doc: str  # the gold document
    retrieval: int | None  # the gold page's rank after retrieval, reranking and page choice (None: not in the pool)
    rerank: int | None
    final: int | None
    stage: str  # one of STAGES
    doc_right: bool
    page: int | None  # the page named from the top passage
    page_right: bool
    proximity: float
    read: list[tuple[str, list[int]]]  # the passages read: (document, pages)
    prompt_tokens: int = 0  # the answer model's shared prompt over those passages (its own tokens; no model run)


def prompt_tokens(q: Question, evidence: list[Candidate], settings: Settings) -> int:
    """Tokens of the shared prompt the answer model would read (``backends.llama_cpp``'s ``prompt_tokens``:
    each passage cut to ``passage_tokens``, then fitted to the context), counted with its vocabulary only."""
    from pipeline.backends.vocab import qwen_vocab
    from pipeline.prompts import fit_lines, fit_shared_prompt, passage_text, question_terms

    vocab = qwen_vocab()
    count = lambda t: len(vocab.encode(t))  # noqa: E731
    terms = question_terms(q)
    passages = [fit_lines(passage_text(c), settings.answer.passage_tokens, terms, count) for c in evidence]
    return count(fit_shared_prompt(q, passages, count, settings.answer.n_ctx))


def where_lost(retrieval: int | None, reranked: int | None, read: bool, k: int) -> str:
    """The stage that lost the gold page (or ``READ`` when it is among the passages read)."""
    if read:
        return READ
    if retrieval is None:
        return NOT_RETRIEVED
    if reranked is not None and reranked <= k:
        return PAGE_OUT
    return RERANK_LOW


def diagnose(pipe: Pipeline, q: Question, n_pages: dict[str, int]) -> Diagnosis:
    """Retrieval, reranking and page choice of one question, each stage's gold rank kept apart."""
    return stages(pipe, q, n_pages)[0]


def stages(pipe: Pipeline, q: Question, n_pages: dict[str, int]) -> tuple[Diagnosis, list[Candidate], list[Candidate]]:
    """:func:`diagnose`'s record, with the candidates after retrieval and after page choice."""
    s = pipe.settings
    cands = pipe.retriever.search(q)
    retrieved = cands  # immutable: reranking makes new candidates
    r_retrieval = gold_rank(cands, q)
    reranked = rerank(pipe.reranker, q, cands)
    r_rerank = gold_rank(reranked, q)
    final = rescore_pages(q, reranked, pipe.library, s, pipe.models.embedder)
    r_final = gold_rank(final, q)
    top = final[0]
    page = evidence_page(top, q, None)
    doc = top.chunk.doc_name
    k = s.answer.top_k_answer
    evidence = pipe.evidence(final, k)
    read = gold_rank(evidence, q) is not None
    return Diagnosis(q.qid, q.gold_doc, r_retrieval, r_rerank, r_final, where_lost(r_retrieval, r_rerank, read, k),
                     doc == q.gold_doc, page, doc == q.gold_doc and page == q.gold_page,
                     page_proximity(doc, page, q.gold_doc, q.gold_page, n_pages.get(q.gold_doc, 0)),
                     [(c.chunk.doc_name, c.chunk.pages) for c in evidence],
                     prompt_tokens(q, evidence, s)), retrieved, final


# ---- end to end: every scorer on the same passages ----------------------------------------------
# the answer scorers compared (settings over the profile's); "listed" alone is read off the listed run's own
# values (features["listed_value"]: the same model call, no lexical support), so it costs nothing more
SCORERS = {"listed+support (cpu default)": {"scorer": "listed", "listed_support_weight": 1.0},
           "option": {"scorer": "option"}}


def answer_all(pipe: Pipeline, q: Question, n_pages: dict[str, int], scorers: list[str] | None = None) -> dict:
    """One question end to end (``Pipeline.ask`` from the same search results) under each of ``SCORERS``, on the
    same passages; the model reads the shared prompt once (its prefix cache)."""
    import time

    from pipeline.answering import answer as answering
    from pipeline.types import Search

    t0 = time.perf_counter()
    d, retrieved, final = stages(pipe, q, n_pages)
    t_retrieve = time.perf_counter() - t0
    rec = {"qid": q.qid, "doc": q.gold_doc, "gold": q.gold_answer, "stage": d.stage, "scorers": {}}
    ans = pipe.models.answerer
    found = Search(q, tuple(retrieved), tuple(final), {}, ())
    with ans.exclusive():
        for name, over in SCORERS.items():
            if scorers and name.split()[0] not in scorers:
                continue
            s = pipe.settings.with_(**over)
            t = time.perf_counter()
            a = Pipeline(s, models=pipe.models, library=pipe.library).ask(q, found=found)
            first = not rec["scorers"]  # the others find the passages already read (prefix cache)
            rec["scorers"][name] = _scored(a.letter, a.doc_name, a.page, q, n_pages,
                                          time.perf_counter() - t + t_retrieve if first else None,
                                          a.details["prompt_tokens"])
            feats = a.details.get("features") or {}
            rec["scorers"][name]["probabilities"] = [a.probabilities.get(x, 0.0) for x in LETTERS]
            lv = feats.get("listed_value")
            if lv is not None:  # the listed run's own values, before support and temperature (re-weighed offline)
                rec["listed_value"], rec["listed_support"] = list(map(float, lv)), feats.get("listed_support")
                letter = LETTERS[int(np.argmax(lv))]
                rec["scorers"]["listed"] = _scored(letter, a.doc_name, answering.evidence_page(final[0], q, letter), q,
                                                   n_pages, None, a.details["prompt_tokens"])
    return rec


def _scored(letter, doc, page, q: Question, n_pages, seconds, prompt_tokens) -> dict:
    return {"answer": letter, "right": letter == q.gold_answer, "doc_right": doc == q.gold_doc,
            "proximity": page_proximity(doc, page, q.gold_doc, q.gold_page, n_pages.get(q.gold_doc, 0)),
            "page_right": doc == q.gold_doc and page == q.gold_page, "seconds": seconds, "prompt_tokens": prompt_tokens}


def answer_table(recs: dict[str, list[dict]]) -> str:
    """Per set and scorer: n, answer accuracy, score, page@1, p50 seconds, mean prompt tokens."""
    import statistics

    lines = ["| set | scorer | n | answer acc | score | doc acc | page prox | page@1 | p50 s | prompt tokens (mean) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, rs in recs.items():
        for sc in rs[0]["scorers"] if rs else []:
            xs = [r["scorers"][sc] for r in rs]
            n = len(xs)
            acc = sum(x["right"] for x in xs) / n
            doc = sum(x["doc_right"] for x in xs) / n
            prox = sum(x["proximity"] for x in xs) / n
            secs = [x["seconds"] for x in xs if x["seconds"] is not None]
            p50 = f"{percentile(secs, 0.5):.1f}" if secs else "(same call)"
            lines.append(f"| {name} | {sc} | {n} | {acc:.3f} | {competition_score(acc, doc, prox):.3f} | {doc:.3f} | "
                         f"{prox:.3f} | {sum(x['page_right'] for x in xs) / n:.3f} | {p50} | "
                         f"{statistics.mean(x['prompt_tokens'] for x in xs):.0f} |")
    return "\n".join(lines)


SUPPORT_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)


def support_weight_table(recs: dict[str, list[dict]], weights=SUPPORT_WEIGHTS) -> str:
    """The listed scorer's answer accuracy at each lexical-support weight, from the recorded raw values (argmax of
    value + weight × support: the temperature does not move it), and the weight chosen leave-one-document-out."""
    lines = ["| set | n | " + " | ".join(f"support weight {w:g}" for w in weights) + " | chosen leave-one-document-out |",
             "|---|---|" + "---|" * (len(weights) + 1)]
    for name, rs in recs.items():
        rs = [r for r in rs if r.get("listed_value") is not None]
        if not rs:
            continue

        def right(r, w):
            v = np.array(r["listed_value"]) + w * np.array(r["listed_support"])
            return LETTERS[int(np.argmax(v))] == r["gold"]

        acc = [sum(right(r, w) for r in rs) / len(rs) for w in weights]
        held = 0
        for d in {r["doc"] for r in rs}:
            train = [r for r in rs if r["doc"] != d]
            best = max(weights, key=lambda w: (sum(right(r, w) for r in train), -abs(w - 1.0)))
            held += sum(right(r, best) for r in rs if r["doc"] == d)
        lines.append(f"| {name} | {len(rs)} | " + " | ".join(f"{x:.3f}" for x in acc) + f" | {held / len(rs):.3f} |")
    return "\n".join(lines)


def summary(rows: list[Diagnosis]) -> dict:
    n = len(rows)
    counts = Counter(r.stage for r in rows)
    out = {"n": n}
    out.update({st: counts.get(st, 0) / n for st in STAGES})
    out["page@1"] = sum(r.page_right for r in rows) / n
    out["doc_accuracy"] = sum(r.doc_right for r in rows) / n
    out["page_proximity"] = sum(r.proximity for r in rows) / n
    out["recall@20_retrieval"] = sum(r.retrieval is not None for r in rows) / n
    out["prompt_tokens"] = sum(r.prompt_tokens for r in rows) / n
    return out


def by_document(rows: list[Diagnosis]) -> dict[str, dict]:
    docs: dict[str, list[Diagnosis]] = {}
    for r in rows:
        docs.setdefault(r.doc, []).append(r)
    return {d: summary(rs) for d, rs in sorted(docs.items())}


# ---- an embedding cache (the bench only): a chunk or query embedded once is never embedded again ----
class CachedEmbedder(Embedder):
    """The embedder with its vectors kept on disk by the text's hash, so that indexing a library again
    under another chunking embeds only the chunks that changed, and variants re-embed no query."""

    def __init__(self, inner: Embedder, path: Path):
        self.inner, self.path = inner, path
        self.cache: dict[str, np.ndarray] = {}
        self.new = 0
        self.lock = threading.Lock()
        if path.exists():
            with np.load(path) as z:
                self.cache = dict(zip(z["keys"].tolist(), z["vecs"]))

    def _embed(self, kind: str, texts: list[str], fn) -> np.ndarray:
        keys = [hashlib.sha1(f"{kind}\0{t}".encode()).hexdigest() for t in texts]
        todo = [i for i, k in enumerate(keys) if k not in self.cache]
        if todo:
            vecs = fn([texts[i] for i in todo])
            with self.lock:
                for i, v in zip(todo, vecs):
                    self.cache[keys[i]] = np.asarray(v, dtype=np.float32)
                self.new += len(todo)
            if self.new >= 64:
                self.save()
        return np.stack([self.cache[k] for k in keys])

    def save(self) -> None:
        with self.lock:
            if not self.new:
                return
            keys, vecs = list(self.cache), list(self.cache.values())
            self.new = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.stem + ".tmp.npz")
        np.savez(tmp, keys=np.array(keys), vecs=np.stack(vecs))
        tmp.replace(self.path)

    def embed_passages(self, texts):
        return self._embed("p", texts, self.inner.embed_passages)

    def embed_queries(self, texts):
        return self._embed("q", texts, self.inner.embed_queries)

    def count_word_tokens(self, word):
        return self.inner.count_word_tokens(word)


# ---- the sets and their libraries -------------------------------------------------------------
def sets(long_dir: Path, unlp_dir: Path) -> dict[str, tuple[list[Path], Path]]:
    """name → (the library's PDFs, the questions CSV)."""
    leaflets = list_pdfs(unlp_dir / "pdfs")
    return {"unlp": (leaflets, unlp_dir / "questions.csv"),
            "long": (list_pdfs(long_dir / "pdfs") + leaflets, long_dir / "questions.csv")}


def library_root(data_dir: Path, name: str, settings: Settings) -> Path:
    return data_dir / f"{name}-{settings.fingerprint()}"


def open_set(name: str, pdfs: list[Path], data_dir: Path, settings: Settings, models: Models,
             say=print) -> Pipeline:
    """The set's pipeline over its library, indexed (built once per fingerprint; the long set's library
    starts as a copy of the leaflets' one when that exists, so the leaflets are embedded once)."""
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


# ---- printing ---------------------------------------------------------------------------------
COLUMNS = [(READ, "**gold in 2 read**"), (NOT_RETRIEVED, "not in top 20"), (RERANK_LOW, "ranks 3-20 reranked"),
           (PAGE_OUT, "out by page choice"), ("page@1", "page@1"), ("doc_accuracy", "doc acc"),
           ("page_proximity", "page prox"), ("prompt_tokens", "prompt tokens (mean)")]


def table(results: dict[str, dict]) -> str:
    """One row per (label, set): the share of questions at each stage, then page@1, doc accuracy, proximity."""
    lines = ["| variant | set | n | " + " | ".join(h for _, h in COLUMNS) + " |", "|---" * (3 + len(COLUMNS)) + "|"]
    for label, per_set in results.items():
        for name, m in per_set.items():
            lines.append(f"| {label} | {name} | {m['n']} | " + " | ".join(f"{m[k]:.3f}" for k, _ in COLUMNS) + " |")
    return "\n".join(lines)


def show_lost(pipe: Pipeline, questions: dict[str, Question], rows: list[Diagnosis], n: int, width: int = 600) -> None:
    """The question, the gold page's text and what was read instead, for up to ``n`` lost questions."""
    lost = [r for r in rows if r.stage != READ][:n]
    names = {d.name: d.doc_hash for d in pipe.library.documents()}
    for r in lost:
        q = questions[r.qid]
        print(f"\n=== {r.qid} [{r.stage}] ranks {r.retrieval}/{r.rerank}/{r.final}  {q.text}")
        print(f"    gold {q.gold_answer}: {q.options['ABCDEF'.index(q.gold_answer)]!r}  doc {r.doc[:8]} p{q.gold_page}")
        page = pipe.library.page(names[r.doc], q.gold_page) if r.doc in names else None
        if page is not None:
            print("    GOLD PAGE: " + " ".join(page.markdown.split())[:width])
        for doc, pages in r.read:
            print(f"    read: {doc[:8]} p{pages}")


def cross_validated(rows: list[dict], set_name: str = "long") -> tuple[dict, dict[str, str]]:
    """Leave one document out over the variants measured: for each gold document of ``set_name``, the variant
    with the most gold pages read (then page@1) on the *other* documents' questions, scored on its own.
    Returns the held-out summary over all questions and the variant chosen for each document."""
    rows = [r for r in rows if r["set"] == set_name]
    docs = sorted({r["doc"] for r in rows})
    labels = list(dict.fromkeys(r["variant"] for r in rows))
    held: list[Diagnosis] = []
    chosen = {}
    for d in docs:
        def fit(label):
            train = [r for r in rows if r["variant"] == label and r["doc"] != d]
            return (sum(r["stage"] == READ for r in train), sum(r["page_right"] for r in train))
        best = max(labels, key=fit)  # max keeps the first of equals: the variants' order breaks ties
        chosen[d] = best
        held += [Diagnosis(**{k: v for k, v in r.items() if k not in ("variant", "set")})
                 for r in rows if r["variant"] == best and r["doc"] == d]
    return summary(held), chosen


def write_report(path: Path, argv: list[str], results: dict, per_doc: dict) -> None:
    head = (f"# bench.rulebooks — {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
            f"{platform.machine()}, {os.cpu_count()} cores\n\n`python -m bench.rulebooks {' '.join(argv)}`\n\n")
    docs = "\n".join(f"- {label} / {d[:8]}: n={m['n']} read {m[READ]:.3f} page@1 {m['page@1']:.3f}"
                     for label, per in per_doc.items() for d, m in per.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head + table(results) + "\n\nPer document (long set):\n\n" + docs + "\n")


def main(argv: list[str] | None = None) -> int:
    import sys

    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m bench.rulebooks", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=Path("data/rulebooks"), help="libraries, one per set and fingerprint")
    ap.add_argument("--long", type=Path, default=Path("../shared/unlp-long"), help="the rulebooks (pdfs/, questions.csv)")
    ap.add_argument("--unlp", type=Path, default=Path("../shared/unlp"), help="the leaflets (pdfs/, questions.csv)")
    ap.add_argument("--only", choices=["long", "unlp"], default=None, help="one set only")
    ap.add_argument("--profile", default=None)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL:KEY=VALUE[,KEY=VALUE]",
                    help="also measure this variant (settings that keep the chunking reuse the index)")
    ap.add_argument("--show-lost", type=int, default=0, metavar="N", help="print up to N lost questions per set")
    ap.add_argument("--out", type=Path, default=None, help="write the table (markdown) and per-question rows (jsonl)")
    ap.add_argument("--cv", action="store_true",
                    help="also the variants chosen leave-one-rulebook-out (the long set) and their held-out figures")
    ap.add_argument("--answer", action="store_true",
                    help="end to end instead: the answer model under every scorer on the same passages (first variant)")
    ap.add_argument("--limit", type=int, default=None, help="--answer: only the first N questions per set")
    ap.add_argument("--scorer", action="append", default=[], choices=[k.split()[0] for k in SCORERS],
                    help="--answer: only this scorer (repeatable; listed+support also gives listed and the raw values)")
    a = ap.parse_args(argv)
    base = parse_overrides(a.set)
    variants = {"default" + (f" ({', '.join(a.set)})" if a.set else ""): base}
    for v in a.variant:
        label, _, pairs = v.partition(":")
        variants[label] = {**base, **parse_overrides([p for p in pairs.split(",") if p])}
    plain = Models(load_settings(a.profile, **base))
    cached = CachedEmbedder(plain.embedder, a.data_dir / "vectors.npz")
    models = Models(plain.settings, embedder=cached)
    results: dict[str, dict] = {}
    per_doc: dict[str, dict] = {}
    all_rows: list[dict] = []
    if a.answer:
        return run_answers(a, argv, variants, models, cached)
    for name, (pdfs, csv_path) in sets(a.long, a.unlp).items():
        if a.only and name != a.only:
            continue
        questions, _ = read_questions(csv_path.read_bytes())
        for label, over in variants.items():
            settings = load_settings(a.profile, **over)
            pipe = open_set(name, pdfs, a.data_dir, settings, models)
            n_pages = {d.name: d.n_pages for d in pipe.library.documents()}
            rows = [diagnose(pipe, q, n_pages) for q in questions]
            results.setdefault(label, {})[name] = summary(rows)
            if name == "long":
                per_doc[label] = by_document(rows)
            all_rows += [{"variant": label, "set": name, **r.__dict__} for r in rows]
            m = results[label][name]
            print(f"{name:5s} {label:40s} " + " ".join(f"{h.strip('*')}={m[k]:.3f}" for k, h in COLUMNS), flush=True)
            if a.show_lost:
                show_lost(pipe, {q.qid: q for q in questions}, rows, a.show_lost)
            pipe.library.close()
            cached.save()
    if a.cv and "long" in sets(a.long, a.unlp) and len(variants) > 1:
        m, chosen = cross_validated(all_rows)
        results["cross-validated by rulebook (leave one out)"] = {"long": m}
        print("cross-validated choice: " + ", ".join(f"{d[:8]} → {v}" for d, v in chosen.items()))
    print(table(results))
    for label, per in per_doc.items():
        for d, m in per.items():
            print(f"  {label} / {d[:8]}: n={m['n']} read {m[READ]:.3f} page@1 {m['page@1']:.3f} "
                  f"not-retrieved {m[NOT_RETRIEVED]:.3f} rerank-low {m[RERANK_LOW]:.3f} page-out {m[PAGE_OUT]:.3f}")
    if a.out:
        write_report(a.out.with_suffix(".md"), argv, results, per_doc)
        with open(a.out.with_suffix(".jsonl"), "w", encoding="utf-8") as f:
            for r in all_rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return 0


def run_answers(a, argv, variants, models, cached) -> int:
    """``--answer``: every set end to end under the first variant's settings, each scorer on the same passages."""
    over = next(iter(variants.values()))
    settings = load_settings(a.profile, **over)
    recs: dict[str, list[dict]] = {}
    for name, (pdfs, csv_path) in sets(a.long, a.unlp).items():
        if a.only and name != a.only:
            continue
        questions, _ = read_questions(csv_path.read_bytes())
        pipe = open_set(name, pdfs, a.data_dir, settings, models)
        cached.save()
        n_pages = {d.name: d.n_pages for d in pipe.library.documents()}
        out = a.out.with_name(a.out.name + f"-{name}-answers.jsonl") if a.out else None
        done = {}
        if out and out.exists():  # resumable: questions already answered are kept
            done = {r["qid"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
        rs = []
        for i, q in enumerate(questions[: a.limit] if a.limit else questions, 1):
            r = done.get(q.qid) or answer_all(pipe, q, n_pages, a.scorer)
            if out and q.qid not in done:
                with open(out, "a", encoding="utf-8") as f:
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
            rs.append(r)
            print(f"[{name} {i}] {q.qid} gold {q.gold_answer} {r['stage']}: "
                  + " ".join(f"{k.split()[0]}={v['answer']}{'✓' if v['right'] else '✗'}" for k, v in r["scorers"].items()),
                  flush=True)
        recs[name] = rs
        pipe.library.close()
    t = answer_table(recs) + "\n\n" + support_weight_table(recs)
    print(t)
    if a.out:
        head = (f"# bench.rulebooks --answer — {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
                f"{platform.machine()}, {os.cpu_count()} cores\n\n`python -m bench.rulebooks {' '.join(argv)}`\n\n")
        a.out.with_name(a.out.name + "-answers.md").write_text(head + t + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
