"""Batch evaluation one stage per process, for models that cannot be resident together.

    python -m pipeline.evaluation.staged --pdfs DIR --questions CSV --out DIR --profile t4x2-paper

The reference configuration (Qwen3-Embedding-8B, Qwen3-Reranker-8B,
Qwen3-32B-AWQ on 2x T4) does not fit in GPU memory at once, and freeing a
tensor-parallel vLLM engine inside a process is unreliable. So each stage runs
over the whole batch in its own child process and exits, which frees the GPUs
for the next:

1. ``embed``  — index the PDFs (passage vectors into the library) and embed
   every query text the later stages will ask for → ``stages/queries.npz``;
2. ``rerank`` — retrieval for every question (dense from the stored query
   vectors, BM25) and the reranker over all (question, candidate) pairs in one
   batch → ``stages/reranked.json``;
3. ``answer`` — the answerer over every question's evidence in one batch, then
   the usual evaluation bookkeeping (``pipeline.evaluation.run``) (localisation, retry,
   submission.csv, metrics.json, trace.jsonl) on the stored candidates.

Any profile works (``--profile cpu`` gives the same predictions as
``pipeline.evaluate``); each stage records its time, throughput and the GPUs'
memory (``nvidia-smi``) in ``stages/<stage>.json`` and in ``metrics.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..backends.base import Answerer, Scores
from ..backends.registry import Models
from ..errors import QuestionsError
from ..gpu.monitor import GpuMonitor
from ..index import Library
from ..documents.ingest import list_pdfs
from ..qa import Pipeline
from ..search.rerank import apply_scores, make_reranker, option_queries
from ..search.retrieval import Retriever, query_text
from ..settings import Settings, load_settings, parse_overrides
from ..types import Candidate, Question, Search
from .questions import read_questions
from .run import evaluate, index_folder

STAGES = ("embed", "rerank", "answer")


class StoredQueries:
    """Query vectors computed by the embed stage (what the retriever and reranker ask to embed)."""

    def __init__(self, texts: list[str], vectors: np.ndarray):
        self._v = {t: v for t, v in zip(texts, np.asarray(vectors, dtype=np.float32))}

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self._v]
        if missing:
            raise KeyError(f"the embed stage did not embed this query: {missing[0][:80]!r}")
        return np.stack([self._v[t] for t in texts])


def query_texts(questions: list[Question], s: Settings) -> list[str]:
    """Every text the retrieval and reranking stages will embed as a query."""
    out: list[str] = []
    for q in questions:
        if s.search.retrieval != "bm25":
            out.append(query_text(q, s))
        if s.rerank.reranker == "options":
            out += option_queries(q)
    return list(dict.fromkeys(out))


class _Paths:
    def __init__(self, out: Path):
        self.dir = out / "stages"
        self.queries = self.dir / "queries.npz"
        self.reranked = self.dir / "reranked.json"

    def report(self, stage: str) -> Path:
        return self.dir / f"{stage}.json"


def _write(path: Path, obj) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, ensure_ascii=False, indent=1))
    tmp.replace(path)


def _rate(n: float, secs: float) -> float | None:
    return round(n / secs, 3) if secs > 0 else None


# ---- stage 1: embed ------------------------------------------------------------------------
def stage_embed(s: Settings, root: Path, pdfs: Path, questions: list[Question], paths: _Paths) -> dict:
    with GpuMonitor() as gpu:
        t0 = time.perf_counter()
        emb = Models(s).embedder
        lib = Library(root, emb, s)
        t_load = time.perf_counter() - t0
        before = lib.n_chunks()
        rep = index_folder(lib, list_pdfs(pdfs), say=lambda m: print(f"  {m}", flush=True))
        passages = lib.n_chunks() - before
        texts = query_texts(questions, s)
        t1 = time.perf_counter()
        vecs = [emb.embed_queries(texts[i:i + s.search.embed_batch]) for i in range(0, len(texts), s.search.embed_batch)]
        t_q = time.perf_counter() - t1
    np.savez(paths.queries, vectors=np.concatenate(vecs) if vecs else np.zeros((0, 1), np.float32),
             texts=np.array(texts, dtype=object))
    return {"stage": "embed", "model": s.roles.embed_model if s.search.embedder != "e5" else "e5", "load_seconds": t_load,
            "indexed": len(rep["indexed"]), "failed": rep["failed"], "passages": passages,
            "index_seconds": rep["seconds"], "passages_per_second": _rate(passages, rep["seconds"]),
            "queries": len(texts), "query_seconds": t_q, "queries_per_second": _rate(len(texts), t_q),
            "gpu": gpu.report()}


def _stored_queries(paths: _Paths) -> StoredQueries:
    z = np.load(paths.queries, allow_pickle=True)
    return StoredQueries([str(t) for t in z["texts"]], z["vectors"])


# ---- stage 2: retrieve + rerank -----------------------------------------------------------
def _cand_json(c: Candidate) -> list:
    return [c.chunk.chunk_id, {k: v for k, v in c.scores.items() if isinstance(v, float)}, c.rank]


def stage_rerank(s: Settings, root: Path, questions: list[Question], paths: _Paths) -> dict:
    pre = _stored_queries(paths)
    with GpuMonitor() as gpu:
        lib = Library(root, None, s)  # reading only: no embedder
        t0 = time.perf_counter()
        retriever = Retriever.for_library(lib, pre, s)
        found, t_ret = [], []
        for q in questions:
            t = time.perf_counter()
            found.append(retriever.search(q))
            t_ret.append(time.perf_counter() - t)
        retrieved = found  # candidates are immutable: reranking makes new ones
        t_retrieve = time.perf_counter() - t0
        t1 = time.perf_counter()
        reranker = make_reranker(s, lib, pre, Models(s).reranker)
        t_load = time.perf_counter() - t1
        t2 = time.perf_counter()
        scores = reranker.score_batch(list(zip(questions, found)))
        t_rerank = time.perf_counter() - t2
    pairs = sum(len(c) for c in found)
    out = {}
    for q, cands, before, sc, tr in zip(questions, found, retrieved, scores, t_ret):
        ranked = apply_scores(cands, sc)
        out[q.qid] = {"retrieved": [_cand_json(c) for c in before],
                      "reranked": [_cand_json(c) for c in ranked],
                      "timings": {"retrieve": tr, "rerank": t_rerank / max(1, len(questions))}}
    _write(paths.reranked, out)
    return {"stage": "rerank", "model": s.roles.rerank_model if s.rerank.reranker in ("vllm", "remote") else s.rerank.reranker,
            "load_seconds": t_load, "questions": len(questions), "retrieve_seconds": t_retrieve,
            "questions_per_second_retrieval": _rate(len(questions), t_retrieve), "pairs": pairs,
            "rerank_seconds": t_rerank, "pairs_per_second": _rate(pairs, t_rerank), "gpu": gpu.report()}


# ---- stage 3: answer -----------------------------------------------------------------------
class BatchedAnswerer(Answerer):
    """Answers primed in one batch (the backend's ``score_batch``); anything else is asked live."""

    def __init__(self, inner: Answerer):
        self.inner = inner
        self.cache: dict[tuple, Scores] = {}

    @staticmethod
    def key(q: Question, evidence: list[Candidate]) -> tuple:
        return q.qid, tuple(c.chunk.chunk_id for c in evidence)

    def prime(self, items: list[tuple[Question, list[Candidate]]]) -> None:
        got = self.inner.score_batch(items)
        self.cache.update({self.key(q, ev): sc for (q, ev), sc in zip(items, got)})

    def score(self, q, evidence, scorer=None) -> Scores:
        hit = self.cache.pop(self.key(q, evidence), None) if scorer is None else None
        return hit or self.inner.score(q, evidence, scorer)


class Replay:
    """An :class:`~pipeline.qa.Asker` whose search results are read from the rerank stage's output: each
    question is answered by the pipeline from its stored candidates (no embedder or reranker is loaded)."""

    def __init__(self, pipe: Pipeline, stored: dict):
        self.pipe, self.settings, self.library, self._stored = pipe, pipe.settings, pipe.library, stored

    def _cands(self, rows: list) -> tuple[Candidate, ...]:
        chunks = {c.chunk_id: c for c in self.library.chunks([r[0] for r in rows])}
        return tuple(Candidate(chunks[cid], dict(sc), rank) for cid, sc, rank in rows if cid in chunks)

    def search(self, q: Question) -> Search:
        st = self._stored[q.qid]
        retrieved = self._cands(st["retrieved"])
        return Search(q, retrieved, self._cands(st["reranked"]), dict(st["timings"]),
                      tuple(self.pipe.lexical_only(list(retrieved), [])))

    def ask(self, q: Question, on_stage=None, **kw):
        return self.pipe.ask(q, on_stage, found=self.search(q), **kw)


def stage_answer(s: Settings, root: Path, questions: list[Question], paths: _Paths, out: Path) -> tuple[dict, dict]:
    stored = json.loads(paths.reranked.read_text())
    with GpuMonitor() as gpu:
        lib = Library(root, None, s)  # reading only: no embedder
        t0 = time.perf_counter()
        answerer = BatchedAnswerer(Models(s).answerer)
        t_load = time.perf_counter() - t0
        pipe = Replay(Pipeline(s, models=Models(s, answerer=answerer), library=lib), stored)
        items = []
        for q in questions:
            if q.qid in stored:
                reranked = list(pipe.search(q).reranked)
                if reranked:
                    items.append((q, pipe.pipe.evidence(reranked, s.answer.top_k_answer)))
        t1 = time.perf_counter()
        answerer.prime(items)
        t_batch = time.perf_counter() - t1
        result, _ = evaluate(pipe, questions, out, write_metrics=False)  # run_stage writes it, with the stages
        t_answer = time.perf_counter() - t1
    report = {"stage": "answer", "model": s.roles.answer_model if s.answer.answerer in ("vllm", "remote") else s.answer.answerer,
              "load_seconds": t_load, "questions": len(items), "batch_seconds": t_batch,
              "questions_per_second": _rate(len(items), t_batch), "answer_seconds": t_answer, "gpu": gpu.report()}
    return report, result


# ---- driver ---------------------------------------------------------------------------------
def _args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pipeline.evaluation.staged", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--profile", default=None)
    ap.add_argument("--data-dir", type=Path, default=None, help="where the index lives (default: <data_dir>/library)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--stage", choices=STAGES, default=None, help="run one stage here (the driver's children)")
    return ap.parse_args(argv)


def run_stage(a) -> int:
    s = load_settings(a.profile, **parse_overrides(a.set))
    try:
        questions, problems = read_questions(a.questions.read_bytes())
    except (QuestionsError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    questions = questions[: a.limit] if a.limit else questions
    root = a.data_dir or s.data_dir / "library"
    paths = _Paths(a.out)
    paths.dir.mkdir(parents=True, exist_ok=True)
    if a.stage == "embed":
        report = stage_embed(s, root, a.pdfs, questions, paths)
    elif a.stage == "rerank":
        report = stage_rerank(s, root, questions, paths)
    else:
        report, result = stage_answer(s, root, questions, paths, a.out)
        stages = [json.loads(paths.report(st).read_text()) for st in STAGES[:2]] + [report]
        result["stages"] = stages
        result["settings"] = json.loads(s.model_dump_json())
        (a.out / "metrics.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    _write(paths.report(a.stage), report)
    print(json.dumps({k: v for k, v in report.items() if k != "gpu"}, ensure_ascii=False), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = _args(argv)
    if a.stage:
        return run_stage(a)
    for stage in STAGES:  # each in its own process: its GPU memory is freed when it exits
        print(f"== stage {stage}", flush=True)
        t0 = time.perf_counter()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(Path(__file__).resolve().parents[2]), *filter(None, [os.environ.get("PYTHONPATH")])]))
        rc = subprocess.call([sys.executable, "-m", "pipeline.evaluation.staged", *argv, "--stage", stage], env=env)
        if rc != 0:
            print(f"stage {stage} failed (exit {rc})", file=sys.stderr)
            return rc
        print(f"== stage {stage} done in {time.perf_counter() - t0:.1f}s", flush=True)
    metrics = json.loads((a.out / "metrics.json").read_text())
    print(json.dumps({k: v for k, v in metrics.items() if k not in ("settings", "stages")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
