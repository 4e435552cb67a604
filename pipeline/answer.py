"""Stage 6 — constrained answering: a probability for each of the six options, never free text.

Both scorers share one prompt prefix (the passages with their ranks and the
question), evaluated once and kept in the model's cache:

* ``option`` — the mean log-probability of each option's own tokens after
  ``Відповідь:`` (one short batched decode per option; better for small models);
* ``letter`` — after the lettered options, the next-token logits of " A" … " F"
  renormalised over the six (the reference system's method, for large models).

The profile says which one answers; ``combined`` computes both (the second
costs little on top of the shared prefix) and answers with their geometric mean.
"""
from __future__ import annotations

import os
import re
import threading
import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from .settings import Settings
from .text import normalize
from .types import Candidate, Question

LETTERS = "ABCDEF"

SYSTEM = (
    "Ти уважно читаєш фрагменти документів і відповідаєш на запитання за ними. "
    "Фрагменти пронумеровано за релевантністю: що менший номер, то тісніше фрагмент пов'язаний із запитанням. "
    "Спирайся на те, що прямо сказано в тексті. Якщо фрагменти розходяться, віддай перевагу "
    "прямому й конкретному формулюванню перед загальним."
)

_EMPH = re.compile(r"\*\*|(?<!\w)_|_(?!\w)|<sup>|</sup>")


def passage_text(c: Candidate) -> str:
    title = c.chunk.prefix[:120].rsplit(" ", 1)[0] if c.chunk.prefix else ""
    head = " — ".join(x for x in (title, c.chunk.heading) if x)
    body = re.sub(r"[ \t]+", " ", _EMPH.sub("", c.chunk.body)).strip()
    return f"{head}\n{body}" if head else body


def shared_prompt(q: Question, passages: list[str]) -> str:
    """System + passages + question: the part both scorers share (evaluated once)."""
    parts = ["Фрагменти документів:\n"]
    for i, p in enumerate(passages, 1):
        parts.append(f"[Фрагмент {i}]\n{p}\n")
    parts.append(f"Запитання: {q.text.strip()}")
    return f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n" + "\n".join(parts)


OPTION_TAIL = "<|im_end|>\n<|im_start|>assistant\nВідповідь:"


def letter_tail(q: Question) -> str:
    opts = "\n".join(f"{LETTERS[i]}. {o.strip()}" for i, o in enumerate(q.options))
    return (f"\n\nВаріанти відповіді:\n{opts}\n\nОбери один правильний варіант і відповідай лише його літерою."
            f"<|im_end|>\n<|im_start|>assistant\nВідповідь:")


def fit_lines(text: str, budget: int, terms: set[str], count) -> str:
    """The run of whole lines within ``budget`` tokens (``count`` counts them) that shares most words
    with the question and options; the first line (title or heading) is kept when it is short."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    sizes = [count(ln) + 1 for ln in lines]
    if budget <= 0 or sum(sizes) <= budget:
        return text
    hits = [len(terms & set(normalize(ln, "prefix6"))) for ln in lines]
    best, best_hits, j, used, got = (0, 0), -1, 0, 0, 0
    for i in range(len(lines)):  # sliding window [j, i]
        used += sizes[i]
        got += hits[i]
        while used > budget and j < i:
            used -= sizes[j]
            got -= hits[j]
            j += 1
        if got > best_hits:
            best, best_hits = (j, i), got
    head = lines[0] if best[0] > 0 and sizes[0] < budget // 8 else None
    body = lines[best[0]: best[1] + 1]
    return "\n".join(([head, "…"] if head else []) + body)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


@dataclass
class Scores:
    probabilities: dict[str, float]
    letter: dict[str, float] = field(default_factory=dict)
    option: dict[str, float] = field(default_factory=dict)
    prompt_tokens: int = 0
    seconds: float = 0.0


class Answerer(ABC):
    @abstractmethod
    def score(self, q: Question, evidence: list[Candidate], scorer: str | None = None) -> Scores:
        """Probabilities of the six options; ``scorer`` overrides the profile's."""


@contextmanager
def _without_extra_buffers(llama_cpp, off: bool):
    """Load without ggml's extra CPU buffer types (AMX and weight repacking) when ``off``.

    This llama.cpp build has AMX kernels (``AMX_INT8 = 1`` in its system info); on this project's
    machines they crash the process (general protection fault at ``ldtilecfg`` in
    ``ggml_backend_amx_mul_mat``) although the CPU lists ``amx_tile``. Without the extra buffer types
    those kernels are never used (``settings.llama_extra_buffers`` turns them back on).
    """
    if not off:
        yield
        return
    lib = llama_cpp.llama_cpp  # the module Llama() takes its default parameters from
    default = lib.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = False
        return p

    lib.llama_model_default_params = params
    try:
        yield
    finally:
        lib.llama_model_default_params = default


class LlamaCppAnswerer(Answerer):
    """A GGUF chat model through llama-cpp-python (Qwen ChatML prompt format)."""

    def __init__(self, model_path: str, settings: Settings):
        import llama_cpp

        self.settings = settings
        threads = settings.n_threads or os.cpu_count() or 1
        with _without_extra_buffers(llama_cpp, not settings.llama_extra_buffers):
            self.llm = llama_cpp.Llama(model_path, n_ctx=settings.n_ctx, n_threads=threads,
                                       n_threads_batch=threads, n_batch=512, verbose=False)
        self._vocab = self.llm.n_vocab()
        self._lock = threading.Lock()
        ids = [self.llm.tokenize(f" {x}".encode(), add_bos=False) for x in LETTERS]
        if any(len(i) != 1 for i in ids):
            raise RuntimeError("the model's tokenizer does not have single-token letters A–F")
        self.letter_ids = [i[0] for i in ids]

    def _tok(self, text: str, special: bool = False) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def prompt_tokens(self, q: Question, passages: list[str]) -> list[int]:
        """The shared prompt, passages cut from the lowest rank's end until everything fits the context."""
        reserve = len(self._tok(letter_tail(q), special=True)) + 64 + 16
        budget = self.settings.n_ctx - reserve
        while True:
            toks = self._tok(shared_prompt(q, passages), special=True)
            if len(toks) <= budget or not any(passages):
                return toks
            over = len(toks) - budget
            i = max(k for k, p in enumerate(passages) if p)
            cut = max(0, len(passages[i]) - max(200, 3 * over))
            passages = passages[:i] + [passages[i][:cut]] + passages[i + 1:]

    def _logits(self, rows: int = 1) -> np.ndarray:
        a = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(rows, self._vocab)).astype(np.float64)
        return a - np.logaddexp.reduce(a, axis=1, keepdims=True)  # log-probabilities

    def _eval(self, toks: list[int]) -> np.ndarray:
        """Evaluate ``toks`` after the cached state, reusing any shared prefix; log-probs of the next token."""
        llm = self.llm
        common = 0
        for a, b in zip(llm.input_ids[: llm.n_tokens], toks[:-1]):
            if a != b:
                break
            common += 1
        llm.n_tokens = common
        llm.eval(toks[common:])
        return self._logits()[0]

    def _continuation(self, n_past: int, first: np.ndarray, toks: list[int]) -> float:
        """Mean log-probability of ``toks`` after the first ``n_past`` cached tokens (the cache is kept)."""
        llm = self.llm
        lps = [first[toks[0]]]
        if len(toks) > 1:
            llm._ctx.kv_cache_seq_rm(-1, n_past, -1)
            llm._batch.set_batch(batch=toks[:-1], n_past=n_past, logits_all=True)
            llm._ctx.decode(llm._batch)
            rows = self._logits(len(toks) - 1)
            lps += [row[t] for row, t in zip(rows, toks[1:])]
        llm.n_tokens = n_past
        return float(np.mean(lps))

    def fit(self, text: str, budget: int, terms: set[str]) -> str:
        return fit_lines(text, budget, terms, lambda line: len(self._tok(line)))

    def score(self, q: Question, evidence: list[Candidate], scorer: str | None = None) -> Scores:
        t0 = time.perf_counter()
        s = self.settings
        scorer = scorer or s.scorer
        terms = set(normalize(" ".join([q.text, *q.options]), "prefix6"))
        with self._lock:
            passages = [self.fit(passage_text(c), s.passage_tokens, terms) for c in evidence]
            shared = self.prompt_tokens(q, passages)
            option = np.zeros(6)
            letter = np.full(6, 1 / 6)
            n_prompt = len(shared)
            if scorer in ("option", "combined"):
                # option likelihood: passages + question, then each option's own tokens
                opt_prompt = shared + self._tok(OPTION_TAIL, special=True)
                first = self._eval(opt_prompt)
                option = np.full(6, -1e9)
                for i, o in enumerate(q.options):
                    ot = self._tok(" " + o.strip())[:64] if o.strip() else []
                    if ot:
                        option[i] = self._continuation(len(opt_prompt), first, ot)
                n_prompt = len(opt_prompt)
            if scorer in ("letter", "combined"):
                # letter: the same passages + question, then the lettered options
                let_prompt = shared + self._tok(letter_tail(q), special=True)
                letter = softmax(self._eval(let_prompt)[self.letter_ids])
                n_prompt = len(let_prompt)
        opt_p = softmax(option / max(1e-3, s.option_temperature))
        both = np.sqrt(letter * opt_p)
        chosen = {"option": opt_p, "letter": letter, "combined": both / both.sum()}[scorer]
        let = {L: float(p) for L, p in zip(LETTERS, letter)}
        opt = {L: float(p) for L, p in zip(LETTERS, opt_p)}
        probs = {L: float(p) for L, p in zip(LETTERS, chosen)}
        return Scores(probs, let if scorer != "option" else {}, opt if scorer != "letter" else {},
                      n_prompt, time.perf_counter() - t0)


ANSWERERS: dict[str, type] = {}  # optional backends (remote, vllm), registered if their module imports


def make_answerer(settings: Settings) -> Answerer:
    if settings.answerer != "llama-cpp":
        from .backends import optional_backend

        return optional_backend("answerer", settings.answerer, ANSWERERS)(settings)
    from .models import shipped_gguf

    return LlamaCppAnswerer(str(shipped_gguf()), settings)
