"""Every prompt the models see, built as text; nothing here calls a model.

All backends build their prompts here, so tests can check every prompt on
the Qwen vocabulary (``pipeline.backends.vocab``) on a CPU.

* Answerer (all backends): the passages with their ranks and the question
  (:func:`shared_prompt`), then either ``Відповідь:`` and each option's own
  tokens (the option scorer, llama.cpp; the listed scorer writes the six
  options out first: :func:`option_tail`) or the lettered options and one letter
  (:func:`letter_tail`); with Qwen3's empty thinking block when
  ``settings.answer.think_block`` (what its chat template renders for
  ``enable_thinking=False``). Passages are cut to their best-matching lines
  (:func:`fit_lines`) and then, lowest rank first, until the prompt fits the
  context (:func:`fit_to_context`). :func:`letter_token_ids` checks that
  " A" … " F" are one token each.
* Qwen3-Embedding: a query is ``Instruct: {task}\nQuery:{text}``, a passage is
  the bare text (the model card's format; ``settings.remote.embed_query_prefix``).
* Qwen3-Reranker: the model card's chat prompt (system "Judge whether the
  Document meets …", ``<Instruct>: … <Query>: … <Document>: …``, an empty
  ``<think>`` block) around an option-aware query (the question and all six
  options) and the chunk as the document. Without this template its scores
  are close to random.
"""
from __future__ import annotations

import re
from typing import Callable, TypeVar

import numpy as np

from .settings import Settings
from .text import normalize
from .types import LETTERS, Candidate, Question

Count = Callable[[str], int]

ASSISTANT = "<|im_start|>assistant\n"
EMPTY_THINK = "<think>\n\n</think>\n\n"

# Qwen3-Reranker (model card; vLLM examples/pooling/score/qwen3_reranker*.py)
RERANK_PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and "
                 "the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
                 "<|im_start|>user\n")
RERANK_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
RERANK_LABELS = ("no", "yes")  # vLLM: hf_overrides classifier_from_token


T = TypeVar("T")


# ---- answering: the shared prefix and the two tails ------------------------------
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


def option_tail(q: Question, listed: bool) -> str:
    """What follows the shared prompt before each option's own tokens: ``Відповідь:`` alone (the option
    scorer), or (``listed``: the listed scorer) after the six options written out without letters, so the
    model reads every option before it scores one."""
    if not listed:
        return OPTION_TAIL
    opts = "\n".join(f"- {o.strip()}" for o in q.options if o.strip())
    return (f"\n\nВаріанти відповіді:\n{opts}\n\nНапиши правильний варіант дослівно.{OPTION_TAIL}")


def neutral_prompt(q: Question, listed: bool = False) -> str:
    """The question without passages, then :func:`option_tail`: what an option's wording alone is worth."""
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nЗапитання: {q.text.strip()}"
            f"{option_tail(q, listed)}")


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


def fit_to_context(passages: list[str], render: Callable[[list[str]], T], size: Callable[[T], int],
                   budget: int) -> T:
    """``render(passages)``, the passages cut from the lowest rank's end until its ``size`` is within ``budget``."""
    while True:
        out = render(passages)
        n = size(out)
        if n <= budget or not any(passages):
            return out
        i = max(k for k, p in enumerate(passages) if p)
        cut = max(0, len(passages[i]) - max(200, 3 * (n - budget)))
        passages = passages[:i] + [passages[i][:cut]] + passages[i + 1:]


def fit_shared_prompt(q: Question, passages: list[str], count: Count, n_ctx: int) -> str:
    """:func:`shared_prompt` cut (:func:`fit_to_context`) to leave room in ``n_ctx`` for the lettered
    options' tail and an answer."""
    reserve = count(letter_tail(q)) + 64 + 16
    return fit_to_context(passages, lambda ps: shared_prompt(q, ps), count, n_ctx - reserve)


def cut_to_tokens(text: str, budget: int, count: Count) -> str:
    """The longest start of ``text`` that ``count`` finds within ``budget`` tokens."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def question_terms(q: Question) -> set[str]:
    """The question's and options' words, as :func:`fit_lines` matches them."""
    return set(normalize(" ".join([q.text, *q.options]), "prefix6"))


# ---- embedding -------------------------------------------------------------
def embed_query(settings: Settings, text: str) -> str:
    return f"{settings.remote.embed_query_prefix}{text}"


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
    """Passages + question + lettered options, cut from the lowest rank's end to fit ``settings.answer.n_ctx``."""
    terms = question_terms(q)
    passages = [fit_lines(passage_text(c), settings.answer.passage_tokens, terms, count) for c in evidence]
    tail = letter_tail(q)
    finish = with_think_block if settings.answer.think_block else (lambda p: p)
    return fit_to_context(passages, lambda ps: finish(shared_prompt(q, ps) + tail), count, settings.answer.n_ctx - reserve)


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
