"""SIGKILL while indexing: the library stays consistent, across many random kill moments.

A child process indexes a batch of generated PDFs into one library with the
real e5 embedder, logging each stage; the test kills it (SIGKILL) at a random
moment, then opens the library and checks: every listed document is complete
at the level it reached (its pages, chunks and stored PDF all present and
counted; exactly its chunks marked embedded have vectors), nothing of an
unlisted document remains, and search only returns listed chunks. The next
trial's child indexes the same batch again into the same library (after most
documents were removed), so a document cut off before is indexed again. A last
run without a kill must list every document, indexed.

The progressive test kills a child during the background embedding of one
document and checks that the reopened library lists it, finds it by BM25, and
resumes: the final vectors count equals the chunk count, and the passages
embedded after the kill are exactly those without a stored vector.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pipeline.index import Library
from pipeline.settings import load_settings
from counting import CountingEmbedder

ROOT = Path(__file__).resolve().parent.parent
TRIALS = int(os.environ.get("PDFQA_CRASH_TRIALS", "24"))

CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from pipeline.backends.e5 import E5Embedder
    from pipeline.index import Library
    from pipeline.settings import load_settings
    log = open({log!r}, "a", buffering=1)
    lib = Library({lib!r}, E5Embedder(), load_settings())
    log.write("open\\n")
    kill_at = sys.argv[1] if len(sys.argv) > 1 else ""

    def die(where):
        log.write(f"killed {{where}}\\n")
        os.kill(os.getpid(), signal.SIGKILL)

    if kill_at == "after-vectors":  # the worst moments, hit exactly: vectors stored, rows not yet committed
        upsert = lib.vectors._col.upsert
        lib.vectors._col.upsert = lambda **kw: (upsert(**kw), die(kill_at))
    elif kill_at == "mid-transaction":  # pages and chunks written, the transaction not committed

        class Db:
            def __init__(self, db):
                self.db = db
            def __getattr__(self, name):
                return getattr(self.db, name)
            def __enter__(self):
                return self.db.__enter__()
            def __exit__(self, *exc):
                return self.db.__exit__(*exc)
            def executemany(self, sql, rows):
                out = self.db.executemany(sql, rows)
                if "INTO chunks" in sql:
                    die(kill_at)
                return out

        lib.store.db = Db(lib.store.db)
    for path in sorted(Path({pdfs!r}).glob("*.pdf")):
        log.write(f"start {{path.name}}\\n")
        info = lib.add(path.read_bytes(), path.name, progress=lambda stage, f: log.write(f"stage {{stage}}\\n"))
        log.write(f"done {{path.name}} {{'dup' if info.duplicate else 'new'}}\\n")
    log.write("finished\\n")
""")


def make_batch(pdfgen, folder: Path, n: int = 5) -> None:
    folder.mkdir()
    words = ["насос", "фільтр", "клапан", "бак", "датчик", "шланг"]
    for i in range(n):
        w = words[i % len(words)]
        sections = [(f"{j + 1}. Розділ про {w} {i}", (f"Пристрій {w}-{i} працює в режимі {j} і потребує огляду. " * 18))
                    for j in range(3)]
        (folder / f"doc{i}.pdf").write_bytes(pdfgen.ukrainian_pdf(f"Інструкція {w} {i}", sections))


def check_consistent(root: Path, embedder) -> dict:
    """Open the library (this runs the crash sweep) and check every invariant; returns what is listed.

    Opened for reading (no embedder), so no background embedding changes it while it is checked."""
    lib = Library(root, None, load_settings())
    try:
        docs = lib.documents()
        listed = {d.doc_hash for d in docs}
        db = lib.store.db
        stored = lib.vectors._col.get(include=["metadatas"])
        vec_per_doc = Counter(m["doc_hash"] for m in stored["metadatas"])
        assert set(vec_per_doc) <= listed, "vectors of an unlisted document survived"
        assert db.execute("SELECT COUNT(*) FROM chunks WHERE doc_hash NOT IN (SELECT doc_hash FROM documents)"
                          ).fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM pages WHERE doc_hash NOT IN (SELECT doc_hash FROM documents)"
                          ).fetchone()[0] == 0
        for d in docs:
            n_chunks = db.execute("SELECT COUNT(*) FROM chunks WHERE doc_hash=?", (d.doc_hash,)).fetchone()[0]
            n_pages = db.execute("SELECT COUNT(*) FROM pages WHERE doc_hash=?", (d.doc_hash,)).fetchone()[0]
            assert n_chunks == d.n_chunks > 0, (d.name, n_chunks, d.n_chunks)
            assert n_pages == d.n_pages > 0, (d.name, n_pages, d.n_pages)
            assert 0 <= d.n_embedded <= d.n_chunks
            assert vec_per_doc[d.doc_hash] == d.n_embedded, (d.name, vec_per_doc[d.doc_hash], d.n_embedded)
            assert lib.pdf_path(d.doc_hash).read_bytes()[:4] == b"%PDF"
            assert len(lib.chunks_of(d.doc_hash)) == d.n_chunks
        files = lib.store._files
        leftovers = [f.name for f in files.iterdir()] if files.exists() else []
        assert sorted(leftovers) == sorted(f"{h}.pdf" for h in listed), leftovers
        if docs:  # search sees exactly the listed chunks: by BM25 all of them, densely those embedded
            hits = lib.vectors.search(np.asarray(embedder.embed_queries(["огляд пристрою"])[0]), k=100)
            assert all(h.split(":")[0] in listed for h in hits)
            assert len(hits) == sum(d.n_embedded for d in docs)
            lexical = lib.lexical_scores("огляд пристрою")
            assert sorted(lexical) == sorted(c.chunk_id for d in docs for c in lib.chunks_of(d.doc_hash))
        return {d.name: (d.n_chunks, d.state) for d in docs}
    finally:
        lib.close()


def drop_some(root: Path, embedder, rng: random.Random) -> None:
    """Remove most listed documents (removal must keep the library consistent too)."""
    lib = Library(root, embedder, load_settings())
    try:
        for d in lib.documents():
            if rng.random() < 0.8:
                lib.remove(d.doc_hash)
    finally:
        lib.close()


def moment(lines: list[str]) -> str:
    """What the child had last logged when it died: start-up, open, start, stage <name>, killed, done, finished."""
    if not lines:
        return "start-up"
    words = lines[-1].split()
    return " ".join(words[:2]) if words[0] == "stage" else words[0]


@pytest.mark.timeout(1500)
def test_sigkill_during_indexing_leaves_library_consistent(tmp_path, embedder, pdfgen):
    pdfs = tmp_path / "pdfs"
    make_batch(pdfgen, pdfs)
    root, log = tmp_path / "lib", tmp_path / "child.log"
    script = CHILD.format(root=str(ROOT), log=str(log), lib=str(root), pdfs=str(pdfs))
    rng = random.Random(20261130)
    landed: Counter = Counter()
    seen_counts: list[int] = []
    for trial in range(TRIALS):
        log.write_text("")
        # every third trial kills at one of the two worst moments exactly; the others at random moments
        kill_at = ["", "after-vectors", "", "mid-transaction", "", ""][trial % 6]
        child = subprocess.Popen([sys.executable, "-c", script, kill_at], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
        # kill at a random moment: wait for a random number of logged events, plus a random fraction of a second
        target, deadline = (rng.randrange(0, 40) if not kill_at else 10**6), time.monotonic() + 120
        while child.poll() is None and time.monotonic() < deadline:
            if len(log.read_text().splitlines()) >= target:
                break
            time.sleep(0.01)
        time.sleep(rng.choice([0.0, rng.uniform(0, 0.05), rng.uniform(0, 0.4)]))
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
        child.wait(60)
        err = child.stderr.read().decode(errors="replace")
        assert child.returncode in (0, -signal.SIGKILL), err
        lines = log.read_text().splitlines()
        landed[moment(lines)] += 1
        listed = check_consistent(root, embedder)
        seen_counts.append(len(listed))
        if trial < TRIALS - 1:
            drop_some(root, embedder, rng)  # so that the next child has documents to index again
    # the kills landed in many different moments: start-up, parsing, embedding, storing
    assert sum(landed.values()) == TRIALS
    assert len(landed) >= 3, landed
    assert any(k.startswith("stage embed") for k in landed), landed
    assert landed["killed"] >= TRIALS // 3 - 1, landed  # a document already listed is a duplicate: no store
    # and the library grows back: a last run without a kill lists every document, complete
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    final = check_consistent(root, embedder)
    assert sorted(final) == sorted(p.name for p in pdfs.glob("*.pdf")), final
    assert {state for _, state in final.values()} == {"indexed"}, final
    print(f"\nSIGKILL trials: {TRIALS}; last event before each kill: {dict(landed)}; documents listed after "
          f"each: {seen_counts}")


# ---- progressive indexing: a kill during the background embedding ------------------------------------
PROGRESSIVE_CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from pipeline.backends.e5 import E5Embedder
    from pipeline.index import Library
    from pipeline.settings import load_settings
    log = open({log!r}, "a", buffering=1)
    lib = Library({lib!r}, E5Embedder(), load_settings(embed_batch=2), background=True)
    die_after = int(sys.argv[1])  # SIGKILL right after this many batches' vectors are written, not marked (0: never)
    add, n = lib.vectors.add, [0]

    def add_and_log(ids, *a, **kw):
        add(ids, *a, **kw)
        n[0] += 1
        log.write(f"stored {{len(ids)}}\\n")
        if n[0] == die_after:
            os.kill(os.getpid(), signal.SIGKILL)

    lib.vectors.add = add_and_log
    info = lib.add(Path({pdf!r}).read_bytes(), "rules.pdf", progress=lambda stage, f: log.write(f"stage {{stage}}\\n"))
    log.write(f"returned {{info.state}}\\n")
    lib.wait_indexed()
    log.write("finished\\n")
""")

TERMS = ["кавоварка", "пилосос", "холодильник", "мікрохвильовка", "праска", "тостер", "блендер", "міксер",
         "чайник", "фен", "обігрівач", "кондиціонер"]




@pytest.mark.timeout(1200)
def test_sigkill_during_background_embedding_resumes_without_embedding_twice(tmp_path, embedder, pdfgen):
    from pipeline.search.retrieval import Retriever
    from pipeline.types import Question

    sections = [(f"Стаття {j + 1}. Правила для {t}", f"Приймальний пункт ремонтує {t} модель {j} протягом "
                 f"{j + 3} робочих днів за умови наявності гарантійного талона. " * 14) for j, t in enumerate(TERMS)]
    pdf = tmp_path / "rules.pdf"
    pdf.write_bytes(pdfgen.ukrainian_pdf("Правила сервісного центру", sections))
    s = load_settings(embed_batch=2)
    rng = random.Random(20261201)
    for trial, die_after in enumerate([2, 0, 0]):  # exactly after a batch's vectors are written; then random moments
        root, log = tmp_path / f"lib{trial}", tmp_path / f"child{trial}.log"
        log.write_text("")
        script = PROGRESSIVE_CHILD.format(root=str(ROOT), log=str(log), lib=str(root), pdf=str(pdf))
        child = subprocess.Popen([sys.executable, "-c", script, str(die_after)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
        if not die_after:  # kill once the document is searchable and the embedding has begun, a moment later
            deadline = time.monotonic() + 300
            while child.poll() is None and time.monotonic() < deadline and "stored" not in log.read_text():
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 1.0))
            child.send_signal(signal.SIGKILL)
        child.wait(300)
        err = child.stderr.read().decode(errors="replace")
        assert child.returncode == -signal.SIGKILL, err
        lines = log.read_text().splitlines()
        assert "stage searchable" in lines and "returned searchable" in lines and "finished" not in lines, lines
        stored_before = sum(int(x.split()[1]) for x in lines if x.startswith("stored"))

        # reopened for reading: still listed, at the level it reached, and found by BM25
        ro = Library(root, None, s)
        [d] = ro.documents()
        present = ro.vectors._col.count()
        assert d.state == "searchable" and d.n_embedded == present < d.n_chunks, (d, present)
        if die_after:  # the vectors written just before the kill were marked on open, not embedded again
            assert present == stored_before == 2 * die_after
        assert ro.lexical_only_documents() == ["rules.pdf"]
        late = TERMS[-1]  # the last article: not embedded yet
        q = Question("q", f"Хто ремонтує {late}?", ["майстерня", "виробник", "продавець", "власник", "сусід", "ніхто"])
        [top] = Retriever.for_library(ro, embedder, s).search(q, k=1)
        assert late in top.chunk.body and "dense" not in top.scores, (top.chunk.body[:80], top.scores)
        ro.close()

        # reopened with an embedder: the embedding resumes by itself and embeds only what has no vector
        counting = CountingEmbedder(embedder)
        lib = Library(root, counting, s, background=True)
        try:
            assert lib.wait_indexed(timeout=600)
            [d] = lib.documents()
            assert d.state == "indexed" and lib.vectors._col.count() == d.n_chunks
            assert counting.passages == d.n_chunks - present, (counting.passages, d.n_chunks, present)
        finally:
            lib.close()
    print(f"\nprogressive kills: chunks {d.n_chunks}, embedded before the last kill {present}")
