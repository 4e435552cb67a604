"""The three model roles as interfaces, and what they return.

The stages (``pipeline.index``, ``pipeline.search.retrieval``, ``pipeline.search.rerank``,
``pipeline.answering.answer``) see models only through these classes; the backends
(``e5``, ``llama_cpp``, ``vllm_engine``, ``remote``) implement them. Each role
has a batch method with a default (one call per item), which a backend that
can batch (vLLM) overrides.

Besides its six probabilities, an ``Answerer`` has a small interface for free
text, used by free-form answers (``pipeline.answering.freeform``) and the calibrated
scorer's features (``pipeline.answering.features``): :meth:`Answerer.count_tokens`,
:meth:`~Answerer.generate` (and :meth:`~Answerer.generate_streamed`), :meth:`~Answerer.continuation_logprobs`,
:meth:`~Answerer.yes_log_odds` / :meth:`~Answerer.yes_probability`, and two
hints for a backend with one prompt cache (:meth:`~Answerer.prefill`,
:meth:`~Answerer.exclusive`). A backend without one of them raises
:class:`~pipeline.errors.BackendUnsupported` saying so.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable, Sequence, Union

import numpy as np

from ..errors import BackendUnsupported
from ..types import Candidate, Question

Prompt = Union[str, Sequence[str]]
"""A prompt: its text, or the pieces it is made of (a shared part, then a tail). Pieces mean the same
text as their concatenation; a backend that tokenizes here (llama.cpp, vLLM) tokenizes each piece on its
own and joins the ids, so prompts that share a first piece share its tokens exactly (and a cached prefix)."""

YES = (" так", " Так", "так", "Так")  # the words of :meth:`Answerer.yes_log_odds`, each by its first token
NO = (" ні", " Ні", "ні", "Ні")


def prompt_pieces(prompt: Prompt) -> list[str]:
    return [prompt] if isinstance(prompt, str) else list(prompt)


def prompt_text(prompt: Prompt) -> str:
    return "".join(prompt_pieces(prompt))


def l2_normalise(v) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero)."""
    v = np.asarray(v, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def top_log_odds(top: dict, yes, no) -> float:
    """log p(yes) − log p(no) from a server's top-N log-probabilities (``yes``/``no``: the keys of their tokens);
    a side with no key listed counts as the least likely listed token (an upper bound; neither listed reads 0)."""
    floor = min(top.values(), default=0.0)

    def total(keys) -> float:
        got = [lp for k, lp in top.items() if k in keys]
        return float(np.logaddexp.reduce(got)) if got else floor
    return total(set(yes)) - total(set(no))


class Embedder(ABC):
    """Passages and queries to L2-normalised vectors; counts tokens the way it reads them."""

    @abstractmethod
    def embed_passages(self, texts: list[str]) -> np.ndarray:
        """One vector per passage (a batch: the texts go in together)."""

    @abstractmethod
    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """One vector per query (a batch)."""

    @abstractmethod
    def count_word_tokens(self, word: str) -> int:
        """Tokens one whitespace-free word costs inside a passage (chunk sizes are in these tokens)."""


class Reranker(ABC):
    """A relevance score for each (question, candidate) pair; higher is more relevant."""

    @abstractmethod
    def score(self, q: Question, candidates: list[Candidate]) -> list[float]: ...

    def score_batch(self, items: list[tuple[Question, list[Candidate]]]) -> list[list[float]]:
        """Every question's candidates; by default one :meth:`score` call per question."""
        return [self.score(q, cands) if cands else [] for q, cands in items]


@dataclass
class Scores:
    """An answerer's result: the six options' probabilities, and what they came from."""

    probabilities: dict[str, float]
    letter: dict[str, float] = field(default_factory=dict)
    option: dict[str, float] = field(default_factory=dict)
    prompt_tokens: int = 0
    seconds: float = 0.0
    features: dict = field(default_factory=dict)  # the calibrated scorer's raw per-option features


class Answerer(ABC):
    """Probabilities of the six options given the evidence; and free text through a small interface.

    ``settings`` (``n_ctx``, ``think_block``, …) is the profile the answerer was made for.
    """

    @abstractmethod
    def score(self, q: Question, evidence: list[Candidate], scorer: str | None = None) -> Scores:
        """Probabilities of the six options; ``scorer`` overrides the profile's."""

    def score_batch(self, items: list[tuple[Question, list[Candidate]]]) -> list[Scores]:
        """Every question's evidence; by default one :meth:`score` call per question."""
        return [self.score(q, ev) for q, ev in items]

    # ---- free text -------------------------------------------------------------------------------
    def _cannot(self, what: str) -> BackendUnsupported:
        return BackendUnsupported(f"this answer backend ({type(self).__name__}) cannot {what}: free-form answers "
                                  "and the calibrated scorer need one that can (llama_cpp, vllm, remote)")

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` costs in a prompt (special tokens written in it, e.g. ``<|im_end|>``, are one each)."""
        raise self._cannot("count tokens")

    def generate(self, prompt: Prompt, max_tokens: int, stop: list[str] | None = None) -> str:
        """The greedy continuation of ``prompt``: at most ``max_tokens`` tokens, ending at the model's end of
        turn or before the first of the ``stop`` strings (not included)."""
        raise self._cannot("generate text")

    def generate_streamed(self, prompt: Prompt, max_tokens: int, stop: list[str] | None = None,
                          on_text: Callable[[str], None] | None = None) -> str:
        """:meth:`generate`, telling ``on_text`` the text so far as it grows (the web app shows it as it is
        written). By default (the vLLM engine and a remote server) the text is not streamed: ``on_text`` is told
        once, with the whole of it; llama.cpp tells it after each token."""
        text = self.generate(prompt, max_tokens, stop)
        if on_text:
            on_text(text)
        return text

    def continuation_logprobs(self, prompt: Prompt, continuations: list[str],
                              max_tokens: int | None = None) -> list[list[float]]:
        """For each continuation, the log-probability of each of its tokens (the first ``max_tokens``) read
        right after ``prompt``; ``[]`` for an empty one. The continuations are tokenized on their own (start
        them with their space), the prompt is read once (llama.cpp: its cached prefix is reused)."""
        raise self._cannot("score continuations")

    def yes_log_odds(self, prompt: Prompt, yes: Sequence[str] = YES, no: Sequence[str] = NO) -> float:
        """log p(yes) − log p(no) for the token after ``prompt``: p(yes) sums the probabilities of the
        distinct first tokens of the ``yes`` words (p(no) likewise)."""
        raise self._cannot("read yes/no probabilities")

    def yes_probability(self, prompt: Prompt, yes: Sequence[str] = YES, no: Sequence[str] = NO) -> float:
        """p(yes) / (p(yes) + p(no)) for the token after ``prompt`` (:meth:`yes_log_odds` through the logistic)."""
        return float(1 / (1 + np.exp(-self.yes_log_odds(prompt, yes, no))))

    def prefill(self, prompt: Prompt) -> None:
        """Read ``prompt`` ahead of calls whose prompts start with it (a backend with a prompt cache); by
        default nothing (a server reuses its own cache)."""

    def forget(self) -> None:
        """Drop any prompt cached here, so the next call reads its prompt from the start (a benchmark timing
        variants that read the same passages one after the other); by default nothing is cached."""

    def exclusive(self):
        """A context in which this thread's calls follow each other with no other thread's in between
        (llama.cpp: they share its one prompt cache); by default nothing is held."""
        return nullcontext()
