"""Prompts for the GPU and remote backends, built as text and checked on a real tokenizer.

Nothing here calls a model: the vLLM and HTTP backends send what these
functions return, so tests can check every prompt on the Qwen vocabulary
(``pipeline.vocab``) on a CPU.

* Qwen3-Embedding: a query is ``Instruct: {task}\\nQuery:{text}``, a passage is
  the bare text (the model card's format; ``settings.embed_query_prefix``).
* Qwen3-Reranker: the model card's chat prompt (system "Judge whether the
  Document meets …", ``<Instruct>: … <Query>: … <Document>: …``, an empty
  ``<think>`` block) around an option-aware query (the question and all six
  options) and the chunk as the document. Without this template its scores
  are close to random.
* Answerer: the CPU answerer's prompt (``pipeline.answer``: passages, question,
  lettered options, "Відповідь:"), with Qwen3's empty thinking block when
  ``settings.think_block`` (what its chat template renders for
  ``enable_thinking=False``); one next token, restricted to " A" … " F".
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .answer import LETTERS, fit_lines, letter_tail, passage_text, shared_prompt
from .settings import Settings
from .text import normalize
from .types import Candidate, Question

Count = Callable[[str], int]

ASSISTANT = "<|im_start|>assistant\n"
EMPTY_THINK = "<think>\n\n</think>\n\n"

# Qwen3-Reranker (model card; vLLM examples/pooling/score/qwen3_reranker*.py)
RERANK_PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and "
                 "the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
                 "<|im_start|>user\n")
RERANK_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
RERANK_LABELS = ("no", "yes")  # vLLM: hf_overrides classifier_from_token


# ---- embedding -------------------------------------------------------------
def embed_query(settings: Settings, text: str) -> str:
    return f"{settings.embed_query_prefix}{text}"


# ---- reranking -------------------------------------------------------------
def rerank_query(q: Question) -> str:
    """Option-aware: the question and every non-empty option, lettered."""
    opts = "\n".join(f"{L}. {o.strip()}" for L, o in zip(LETTERS, q.options) if o.strip())
    return f"{q.text.strip()}\n{opts}"


def rerank_document(c: Candidate) -> str:
    return passage_text(c)


def rerank_query_part(instruction: str, query: str) -> str:
    return f"{RERANK_PREFIX}<Instruct>: {instruction}\n<Query>: {query}\n"


def rerank_document_part(doc: str) -> str:
    return f"<Document>: {doc}{RERANK_SUFFIX}"


def rerank_prompt(instruction: str, query: str, doc: str) -> str:
    """The whole prompt one (query, document) pair is scored on: p(yes) at its last token."""
    return rerank_query_part(instruction, query) + rerank_document_part(doc)


def rerank_pairs(q: Question, candidates: list[Candidate]) -> tuple[str, list[str]]:
    return rerank_query(q), [rerank_document(c) for c in candidates]


# ---- answering ---------------------------------------------------------------
def with_think_block(prompt: str) -> str:
    """Open the (last) assistant turn with an empty thinking block, as Qwen3 does for enable_thinking=False."""
    i = prompt.rfind(ASSISTANT)
    if i < 0:
        raise ValueError("the prompt has no assistant turn")
    j = i + len(ASSISTANT)
    return prompt if prompt.startswith(EMPTY_THINK, j) else prompt[:j] + EMPTY_THINK + prompt[j:]


def letter_prompt(q: Question, evidence: list[Candidate], settings: Settings, count: Count,
                  reserve: int = 8) -> str:
    """Passages + question + lettered options, cut from the lowest rank's end to fit ``settings.n_ctx``."""
    terms = set(normalize(" ".join([q.text, *q.options]), "prefix6"))
    passages = [fit_lines(passage_text(c), settings.passage_tokens, terms, count) for c in evidence]
    tail = letter_tail(q)
    finish = with_think_block if settings.think_block else (lambda p: p)
    budget = settings.n_ctx - reserve
    while True:
        prompt = finish(shared_prompt(q, passages) + tail)
        n = count(prompt)
        if n <= budget or not any(passages):
            return prompt
        i = max(k for k, p in enumerate(passages) if p)
        cut = max(0, len(passages[i]) - max(200, 3 * (n - budget)))
        passages = passages[:i] + [passages[i][:cut]] + passages[i + 1:]


def letter_texts() -> list[str]:
    """The six answer tokens, as text: the letter after "Відповідь:" comes with its space."""
    return [f" {L}" for L in LETTERS]


def letter_token_ids(encode: Callable[[str], list[int]]) -> list[int]:
    """Token ids of " A" … " F"; each must be one token (true for Qwen2/Qwen3)."""
    ids = [encode(t) for t in letter_texts()]
    if any(len(i) != 1 for i in ids) or len({i[0] for i in ids}) != 6:
        raise RuntimeError(f"the tokenizer has no single-token letters A–F (got {ids})")
    return [i[0] for i in ids]


def renormalise(logprobs: dict[str, float], q: Question | None = None) -> dict[str, float]:
    """Probabilities over the six letters from their log-probabilities.

    A letter without a log-probability, or (given ``q``) whose option is empty, gets 0.
    """
    v = np.array([logprobs.get(L, -np.inf) for L in LETTERS], dtype=np.float64)
    if q is not None:
        v[[i for i, o in enumerate(q.options) if not o.strip()]] = -np.inf
    if not np.isfinite(v).any():
        raise ValueError("no log-probability for any of the letters A–F")
    p = np.exp(v - v[np.isfinite(v)].max())
    p /= p.sum()
    return {L: float(x) for L, x in zip(LETTERS, p)}
