"""The library with its vectors on a real Chroma server (`chroma run`, started here on 127.0.0.1)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from pipeline.errors import BackendUnavailable
from pipeline.index import Library
from pipeline.search.retrieval import Retriever
from pipeline.settings import load_settings
from pipeline.types import Question
from serving import ROOT, chroma_cmd, free_port, server

Q = Question("q1", "Як часто слід мити резервуар для води?",
             ["щодня", "щотижня", "щомісяця", "раз на рік", "ніколи", "після кожного вмикання"])


def top(lib, embedder, settings):
    return [(c.chunk.chunk_id, round(c.scores["fused"], 5)) for c in Retriever.for_library(lib, embedder, settings).search(Q, k=5)]


REOPEN = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    from pipeline.backends.e5 import E5Embedder
    from pipeline.errors import BackendUnavailable
    from pipeline.index import Library
    from pipeline.search.retrieval import Retriever
    from pipeline.settings import load_settings
    from pipeline.types import Question
    calls = []
    class Counting(E5Embedder):  # the real embedder, counting passage embeddings
        def embed_passages(self, texts):
            calls.append(len(texts))
            return super().embed_passages(texts)
    s = load_settings()  # the app's settings: PDFQA_CHROMA_URL comes from the environment
    e = Counting()
    lib = Library({lib!r}, e, s)
    q = Question("q1", {text!r}, {options!r})
    got = [(c.chunk.chunk_id, round(c.scores["fused"], 5)) for c in Retriever.for_library(lib, e, s).search(q, k=5)]
    print(json.dumps({{"top": got, "passages_embedded": sum(calls), "docs": len(lib.documents()),
                       "vectors": lib.vectors._col.count(), "collection": lib.vectors._col.name}}))
""")


def reopen(lib_dir, url):
    script = REOPEN.format(root=str(ROOT), lib=str(lib_dir), text=Q.text, options=Q.options)
    env = {**os.environ, "PDFQA_CHROMA_URL": url}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_index_on_a_chroma_server_survives_app_and_server_restarts(tmp_path, embedder, manual_pdf, other_pdf):
    port, store, lib_dir = free_port(), tmp_path / "chroma-server", tmp_path / "library"
    url = f"http://127.0.0.1:{port}"
    s = load_settings("cpu", chroma_url=url)
    with server(chroma_cmd(store, port), f"{url}/api/v2/heartbeat", timeout=60):
        lib = Library(lib_dir, embedder, s)
        lib.add(manual_pdf, "manual.pdf")
        lib.add(other_pdf, "other.pdf")
        expected = top(lib, embedder, s)
        n = lib.n_chunks()
        assert expected and lib.vectors._col.count() == n
        assert not (lib_dir / "chroma").exists()  # the vectors are on the server, text and PDFs stay here
        assert (lib_dir / "library.sqlite").exists() and len(list((lib_dir / "files").iterdir())) == 2
        # a new app process with the same settings finds the index: same results, nothing re-embedded
        res = reopen(lib_dir, url)
        assert res["passages_embedded"] == 0 and res["docs"] == 2 and res["vectors"] == n
        assert [tuple(x) for x in res["top"]] == expected and res["collection"] == lib.vectors._col.name
    # the Chroma server restarts on its own store: still the same index
    with server(chroma_cmd(store, port), f"{url}/api/v2/heartbeat", timeout=60):
        res = reopen(lib_dir, url)
        assert res["passages_embedded"] == 0 and [tuple(x) for x in res["top"]] == expected


def test_sweep_and_refusals_with_a_chroma_server(tmp_path, embedder, manual_pdf, other_pdf):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    s = load_settings("cpu", chroma_url=url)
    with server(chroma_cmd(tmp_path / "store", port), f"{url}/api/v2/heartbeat", timeout=60):
        a = Library(tmp_path / "a", embedder, s)
        b = Library(tmp_path / "b", embedder, s)  # two libraries on one server: two collections
        a.add(manual_pdf, "manual.pdf")
        b.add(other_pdf, "other.pdf")
        assert a.vectors._col.name != b.vectors._col.name and a.vectors._col.count() == a.n_chunks() and b.vectors._col.count() == b.n_chunks()
        # vectors of a document never listed (a crash between the two writes) are swept on open
        a.vectors._col.upsert(ids=["ghost:0"], embeddings=[[0.1] * 384], metadatas=[{"doc_hash": "ghost", "idx": 0}])
        a2 = Library(tmp_path / "a", embedder, s)
        assert "ghost:0" not in a2.vectors._col.get()["ids"] and a2.vectors._col.count() == a2.n_chunks()
        assert a2.remove(a2.documents()[0].doc_hash) and a2.vectors._col.count() == 0
        a.close()  # closing one library leaves the server's client to the others
        assert b.vectors._col.count() == b.n_chunks() > 0
        # a library whose vectors are elsewhere is refused, not answered from half an index
        with pytest.raises(ValueError, match="vector store at .* holds 0 of its vectors"):
            Library(tmp_path / "b", embedder, load_settings("cpu"))  # embedded store: empty
    with pytest.raises(BackendUnavailable, match=f"Chroma server at {url} cannot be reached"):
        Library(tmp_path / "b", embedder, s)
