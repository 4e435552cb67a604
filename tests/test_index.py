import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline.evaluation.run import index_folder
from pipeline.index import Library
from pipeline.documents.ingest import IngestError
from pipeline.backends.registry import Models
from pipeline.qa import Pipeline
from pipeline.search.retrieval import Retriever
from pipeline.settings import load_settings
from pipeline.types import Question
from counting import CountingEmbedder

ROOT = Path(__file__).resolve().parent.parent
Q = Question("q1", "Як часто слід мити резервуар для води?",
             ["щодня", "щотижня", "щомісяця", "раз на рік", "ніколи", "після кожного вмикання"])


def top(lib, embedder, settings):
    return [(c.chunk.chunk_id, round(c.scores["fused"], 5)) for c in Retriever.for_library(lib, embedder, settings).search(Q, k=5)]


def test_reopened_in_a_new_process_gives_same_results_without_reembedding(tmp_path, embedder, manual_pdf, other_pdf):
    s = load_settings()
    lib = Library(tmp_path, embedder, s)
    lib.add(manual_pdf, "manual.pdf")
    lib.add(other_pdf, "other.pdf")
    expected = top(lib, embedder, s)
    assert expected and expected[0][0].startswith(lib.documents()[0].doc_hash)
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT)!r})
        from pipeline.backends.e5 import E5Embedder
        from pipeline.index import Library
        from pipeline.search.retrieval import Retriever
        from pipeline.settings import load_settings
        from pipeline.types import Question
        calls = []
        class Counting(E5Embedder):  # the real embedder, counting passage embeddings
            def embed_passages(self, texts):
                calls.append(len(texts))
                return super().embed_passages(texts)
        s = load_settings()
        e = Counting()
        lib = Library({str(tmp_path)!r}, e, s)
        q = Question("q1", {Q.text!r}, {Q.options!r})
        got = [(c.chunk.chunk_id, round(c.scores["fused"], 5)) for c in Retriever.for_library(lib, e, s).search(q, k=5)]
        print(json.dumps({{"top": got, "passages_embedded": sum(calls), "docs": len(lib.documents())}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["passages_embedded"] == 0 and res["docs"] == 2
    assert [tuple(x) for x in res["top"]] == expected


def test_duplicate_remove_and_orphan_sweep(tmp_path, embedder, manual_pdf, other_pdf):
    s = load_settings()
    lib = Library(tmp_path, embedder, s)
    first = lib.add(manual_pdf, "manual.pdf")
    again = lib.add(manual_pdf, "copy-of-manual.pdf")
    assert again.duplicate and again.doc_hash == first.doc_hash and len(lib.documents()) == 1
    assert lib.pdf_path(first.doc_hash).read_bytes() == manual_pdf
    n = lib.n_chunks()
    lib.add(other_pdf, "other.pdf")
    assert lib.remove(first.doc_hash)
    assert [d.name for d in lib.documents()] == ["other.pdf"]
    assert lib.vectors._col.count() == lib.n_chunks() < n + lib.n_chunks()
    assert not lib.pdf_path(first.doc_hash).exists()
    # vectors whose document was never listed (a crash between the two writes) vanish on open
    lib.vectors._col.upsert(ids=["ghost:0"], embeddings=[[0.1] * 384], metadatas=[{"doc_hash": "ghost", "idx": 0}])
    lib2 = Library(tmp_path, embedder, s)
    assert "ghost:0" not in lib2.vectors._col.get()["ids"]


def test_other_chunking_settings_are_refused_on_an_existing_library(tmp_path, embedder):
    Library(tmp_path, embedder, load_settings())
    with pytest.raises(ValueError, match="another data directory"):
        Library(tmp_path, embedder, load_settings(chunk_tokens=200))


def test_bad_files_fail_alone_and_the_batch_completes(tmp_path, embedder, pdfgen, manual_pdf):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    (folder / "a_good.pdf").write_bytes(manual_pdf)
    (folder / "b_corrupt.pdf").write_bytes(pdfgen.corrupt_pdf())
    (folder / "c_encrypted.pdf").write_bytes(pdfgen.encrypted_pdf())
    (folder / "d_scanned.pdf").write_bytes(pdfgen.image_only_pdf())
    (folder / "e_text.pdf").write_bytes(pdfgen.not_a_pdf())
    s = load_settings()
    pipe = Pipeline(s, root=tmp_path / "lib", models=Models(s, embedder=embedder))  # indexing only: no answer model
    said = []
    report = index_folder(pipe.library, folder.iterdir(), say=said.append)
    assert report["indexed"] == ["a_good.pdf", "d_scanned.pdf"]  # the scan is read by OCR
    failed = report["failed"]
    assert "damaged" in failed["b_corrupt.pdf"]
    assert "password" in failed["c_encrypted.pdf"]
    assert "not a PDF" in failed["e_text.pdf"]
    assert len(said) == 5 and [d.name for d in pipe.library.documents()] == ["a_good.pdf", "d_scanned.pdf"]
    assert pipe.library.documents()[1].warnings == ["pages 1–2 read by OCR (ukr+eng)"]


# ---- limits: each refusal names its setting, and nothing of the refused file is stored -----------
def _nothing_stored(lib: Library, n_docs: int = 0) -> None:
    assert len(lib.documents()) == n_docs and lib.vectors._col.count() == lib.n_chunks()
    stored = sorted(p.name for p in (lib.root / "files").glob("*"))
    assert stored == sorted(f"{d.doc_hash}.pdf" for d in lib.documents())


def test_upload_size_limit(tmp_path, embedder, manual_pdf):
    lib = Library(tmp_path, embedder, load_settings(max_upload_mb=0.01))
    with pytest.raises(IngestError, match=r"^manual.pdf: the file is 0.0\d+ MB, over the limit of 0.01 MB "
                                          r"\(PDFQA_MAX_UPLOAD_MB\); nothing was read$"):
        lib.add(manual_pdf, "manual.pdf")
    assert lib.documents() == [] and not (tmp_path / "files").exists()


def test_document_count_limit_still_allows_a_known_file(tmp_path, embedder, manual_pdf, other_pdf, pdfgen):
    lib = Library(tmp_path, embedder, load_settings(max_documents=2))
    lib.add(manual_pdf, "manual.pdf")
    lib.add(other_pdf, "other.pdf")
    with pytest.raises(IngestError, match=r"^third.pdf: the library already holds 2 documents, the limit "
                                          r"\(PDFQA_MAX_DOCUMENTS\); remove one to add another$"):
        lib.add(pdfgen.markup_text_pdf(), "third.pdf")
    again = lib.add(manual_pdf, "manual-copy.pdf")  # already there: no room needed
    assert again.duplicate and again.name == "manual.pdf"
    _nothing_stored(lib, 2)


def test_page_limit_through_the_settings(tmp_path, embedder, manual_pdf):
    lib = Library(tmp_path, embedder, load_settings(max_pages=2))
    with pytest.raises(IngestError, match=r"^manual.pdf: \d+ pages is over the limit of 2 pages per document "
                                          r"\(PDFQA_MAX_PAGES\)$"):
        lib.add(manual_pdf, "manual.pdf")
    _nothing_stored(lib)


def test_time_limit_while_parsing(tmp_path, embedder, pdfgen):
    lib = Library(tmp_path, embedder, load_settings(max_pages=2000, max_doc_seconds=0.5))
    big = pdfgen.many_pages_pdf(1000)
    t0 = time.perf_counter()
    with pytest.raises(IngestError, match=r"^big.pdf: took longer than 0.5 s \(PDFQA_MAX_DOC_SECONDS\); "
                                          r"nothing was stored$"):
        lib.add(big, "big.pdf")
    assert time.perf_counter() - t0 < 4.0  # stopped between batches of 32 pages, not after all 1000
    _nothing_stored(lib)


def test_time_limit_is_for_parsing_the_embedding_follows_in_the_background(tmp_path, embedder, manual_pdf):
    """``max_doc_seconds`` bounds the work before a document is listed; its vectors are added afterwards."""
    slow = CountingEmbedder(embedder, delay=1.1)  # the real embedder, 1.1 s slower per batch
    lib = Library(tmp_path, slow, load_settings(max_doc_seconds=1.0, embed_batch=1), background=True)
    try:
        lib.pause_embedding()
        info = lib.add(manual_pdf, "manual.pdf")  # slower than 1 s to embed, but listed before any embedding
        assert info.state == "searchable" and slow.calls == 0 and info.n_chunks * 1.1 > 1.0
        lib.resume_embedding()
        assert lib.wait_indexed(timeout=300)
        assert slow.calls == info.n_chunks and lib.documents()[0].state == "indexed"
        _nothing_stored(lib, 1)
    finally:
        lib.close()


def test_dense_search_is_exact_and_reproducible_while_small_and_sees_new_vectors(tmp_path):
    """Up to exact_search_max chunks every vector is compared (the true nearest, in a fixed order); above it HNSW."""
    import numpy as np

    from pipeline.index.vectors import VectorIndex

    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(3000, 64)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = [f"c{i:03d}" for i in range(3000)]
    s = load_settings("cpu")
    exact = VectorIndex(tmp_path / "a", s, lambda: "a", 0)
    exact.add(ids, vecs, "doc1", list(range(3000)))
    q = rng.normal(size=64).astype(np.float32)
    truth = [ids[i] for i in np.argsort(-(vecs @ (q / np.linalg.norm(q))))[:20]]
    got = exact.search(q, 20)
    assert list(got) == truth
    assert exact.search(q, 20) == got
    again = VectorIndex(tmp_path / "a", s, lambda: "a", 3000)  # reopened: the same chunks, the same scores
    assert again.search(q, 20) == got
    # a vector added after the first search is found (the in-memory copy is refreshed)
    near = (q / np.linalg.norm(q)).reshape(1, -1)
    exact.add(["new"], near, "doc2", [0])
    assert next(iter(exact.search(q, 5))) == "new"
    exact.remove_document("doc2")
    assert "new" not in exact.search(q, 20)
    # ties (repeated pages make identical chunks) are broken by chunk id, never by the graph
    twins = np.repeat(near, 40, axis=0)
    exact.add([f"t{i:02d}" for i in range(40)], twins, "doc3", list(range(40)))
    assert list(exact.search(q, 5)) == ["t00", "t01", "t02", "t03", "t04"]
    hnsw = VectorIndex(tmp_path / "b", s.with_(exact_search_max=0), lambda: "b", 0)
    hnsw.add(ids, vecs, "doc1", list(range(3000)))
    assert len(set(hnsw.search(q, 20)) & set(truth)) >= 10  # approximate


def test_exact_search_copy_follows_every_write_without_reading_the_store_again(tmp_path, monkeypatch):
    """Adds and removals update the in-memory copy (background embedding does not make each question re-read every
    vector); its results equal a fresh read's."""
    import numpy as np

    from pipeline.index.vectors import VectorIndex

    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(500, 32)).astype(np.float32)
    ids = [f"c{i:03d}" for i in range(500)]
    index = VectorIndex(tmp_path, load_settings("cpu"), lambda: "x", 0)
    index.add(ids[:300], vecs[:300], "d1", list(range(300)))
    q = rng.normal(size=32).astype(np.float32)
    index.search(q, 10)  # the copy is read once here
    reads = []
    real_get = index._col.get
    monkeypatch.setattr(index._col, "get", lambda *a, **kw: reads.append(kw) or real_get(*a, **kw))
    index.add(ids[300:], vecs[300:], "d2", list(range(200)))
    index.add(ids[:5], vecs[100:105], "d1", list(range(5)))  # rewritten vectors replace their rows
    got = index.search(q, 20)
    assert reads == []  # no add made the next search read the whole collection again
    index.remove_document("d2")  # (it reads the collection once, to write it anew: removal removes, issue 54)
    reads.clear()
    real_get = index._col.get
    monkeypatch.setattr(index._col, "get", lambda *a, **kw: reads.append(kw) or real_get(*a, **kw))
    after = index.search(q, 20)
    assert reads == []  # nor did the removal
    fresh = VectorIndex(tmp_path, load_settings("cpu"), lambda: "x", 0)
    monkeypatch.undo()
    fresh_vecs = np.concatenate([vecs[100:105], vecs[5:300]])
    fresh_ids = ids[:300]
    unit = fresh_vecs / np.linalg.norm(fresh_vecs, axis=1, keepdims=True)
    truth = [fresh_ids[i] for i in np.argsort(-(unit @ (q / np.linalg.norm(q))), kind="stable")[:20]]
    assert list(after) == truth == list(fresh.search(q, 20))
    assert set(got) - set(after) <= set(ids[300:])  # before the removal d2's chunks could be found


def test_term_statistics_follow_the_library_not_its_chunk_count(tmp_path, embedder, pdfgen):
    """The not-in-documents flag's document frequencies are part of the lexical index: removing a document and
    adding another of the same number of chunks gives the new document's terms, not the removed one's."""
    from pipeline.text import term_key

    def one_page(title, sentence):
        return pdfgen.ukrainian_pdf(title, [("Розділ", sentence)], footer="")

    lib = Library(tmp_path, embedder, load_settings(), background=True)
    try:
        lib.pause_embedding()  # no vectors needed: the statistics are lexical
        a = lib.add(one_page("Правила басейну", "Відвідувач басейну повинен мати шапочку та рушник."), "pool.pdf")
        lib.add(one_page("Правила бібліотеки", "Читач бібліотеки повертає книжки вчасно."), "library.pdf")
        pool, scope, books = term_key("басейну"), term_key("телескопа"), term_key("бібліотеки")
        df, n = lib.doc_freq()
        assert df.get(pool) == 1 and scope not in df
        lib.remove(a.doc_hash)
        b = lib.add(one_page("Правила обсерваторії", "Відвідувач обсерваторії не торкається телескопа."), "obs.pdf")
        assert b.n_chunks == a.n_chunks  # the same number of chunks as the removed document
        df2, n2 = lib.doc_freq()
        assert n2 == n and pool not in df2 and df2.get(scope) == 1, sorted(df2)
        assert df2.get(books) == df.get(books)  # the kept document's counts are unchanged
    finally:
        lib.close()


def test_term_statistics_are_consistent_under_concurrent_readers(tmp_path, embedder, pdfgen):
    """Many threads reading the statistics while documents come and go never see a half-updated count."""
    import threading

    lib = Library(tmp_path, embedder, load_settings(), background=True)
    try:
        lib.pause_embedding()
        docs = [lib.add(pdfgen.ukrainian_pdf(f"Документ {w}", [("Розділ", f"Слово {w} і ще {w} у тексті.")],
                                             footer=""), f"{i}.pdf") for i, w in enumerate(["сосна", "ялина"])]
        seen, errors = [], []

        def read():
            try:
                for _ in range(20):
                    df, n = lib.doc_freq()
                    seen.append((n, sum(df.get(t, 0) for t in ("сосна", "ялина", "береза"))))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        lib.remove(docs[0].doc_hash)
        lib.add(pdfgen.ukrainian_pdf("Документ береза", [("Розділ", "Слово береза і ще береза у тексті.")],
                                     footer=""), "2.pdf")
        for t in threads:
            t.join()
        assert not errors
        assert seen and all(k == n for n, k in seen), set(seen)  # every chunk holds its title's one tree word
    finally:
        lib.close()


def _files_holding(root: Path, needles: dict[str, bytes]) -> dict[str, list[str]]:
    """Which files under ``root`` hold each needle's bytes."""
    found: dict[str, list[str]] = {k: [] for k in needles}
    for f in root.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            for k, b in needles.items():
                if b in data:
                    found[k].append(str(f.relative_to(root)))
    return found


def test_a_removed_document_leaves_no_text_or_vector_in_any_file(tmp_path, embedder, pdfgen, other_pdf):
    """Issue 54: removal removes. A marker word only the removed document holds, its passages' text and its
    vectors' bytes (as given and as Chroma stores them for cosine search, unit length) are searched for in every
    file under the library folder: Chroma's write-ahead log, its HNSW files and free pages included."""
    import numpy as np

    marker = "Зеленокрилозорія"
    doc = pdfgen.ukrainian_pdf("Інструкція з маркером", [
        ("Склад", f"Препарат {marker} містить діючу речовину в кількості 5 мг. " * 8),
        ("Зберігання", f"Зберігати {marker} при температурі до 25 °C у недоступному для дітей місці. " * 8)])
    s = load_settings()
    lib = Library(tmp_path, embedder, s)
    kept = lib.add(other_pdf, "other.pdf")
    gone = lib.add(doc, "marker.pdf")
    chunks = lib.chunks_of(gone.doc_hash)
    vecs = lib.vectors.get([c.chunk_id for c in chunks])
    assert chunks and len(vecs) == len(chunks)
    needles = {"marker": marker.encode(), "passage": chunks[0].body[:60].encode()}
    for cid, v in vecs.items():
        unit = (v / np.linalg.norm(v)).astype(np.float32)
        needles[f"vector {cid}"] = v.astype(np.float32)[8:12].tobytes()
        needles[f"unit vector {cid}"] = unit[8:12].tobytes()
    before = _files_holding(tmp_path, needles)
    assert before["marker"] and any(before[k] for k in needles if k.startswith("vector"))  # the search can find

    lib.remove(gone.doc_hash)
    after = _files_holding(tmp_path, needles)
    assert {k: v for k, v in after.items() if v} == {}
    # the rest of the library answers as before, and after a reopen
    assert [d.name for d in lib.documents()] == ["other.pdf"] and lib.vectors._col.count() == kept.n_chunks
    q = embedder.embed_queries(["Скільки книжок можна взяти додому?"])[0]
    hits = lib.vectors.search(q, 3)
    assert hits and all(h.startswith(kept.doc_hash) for h in hits)
    lib.close()
    again = Library(tmp_path, embedder, s)
    assert again.vectors._col.count() == kept.n_chunks and list(again.vectors.search(q, 3)) == list(hits)
    assert {k: v for k, v in _files_holding(tmp_path, needles).items() if v} == {}
