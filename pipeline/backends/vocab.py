"""Tokenizers for counting and building prompts outside an inference engine.

The GPU and remote profiles run Qwen3 models, which share the Qwen2/Qwen2.5
byte-level BPE vocabulary. That vocabulary ships in this project already:
inside the answer model's GGUF (``pipeline.backends.shipped.shipped_gguf()``), readable
offline through llama.cpp with ``vocab_only=True`` (no weights loaded). So
token counts and token ids of ordinary text (" A", "yes", "no", Ukrainian
words) are exact for Qwen3 without any download. The one difference: Qwen3
added ``<think>``/``</think>`` (ids 151667/151668) as special tokens, which the
Qwen2.5 vocabulary splits into three ordinary tokens each; the vLLM backend
tokenizes with the served model's own tokenizer, so this only affects counts
made here by a few tokens.
"""
from __future__ import annotations

import threading
from functools import lru_cache
from typing import Protocol


class Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: special tokens written in it are parsed, nothing is added."""

    def decode(self, ids: list[int]) -> str: ...


class GgufVocab:
    """The tokenizer stored in a GGUF file, without its weights (llama.cpp ``vocab_only``)."""

    def __init__(self, path: str):
        import llama_cpp

        from .ggml_cpu import load

        load()  # a portable build's CPU kernels registered first

        self._v = llama_cpp.Llama(path, vocab_only=True, verbose=False)
        self._lock = threading.Lock()

    def encode(self, text: str) -> list[int]:
        with self._lock:
            return self._v.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def decode(self, ids: list[int]) -> str:
        with self._lock:
            return self._v.detokenize(list(ids), special=True).decode("utf-8", errors="replace")


class HfTokenizer:
    """A Hugging Face tokenizer (e.g. vLLM's ``LLM.get_tokenizer()``) behind the same two calls."""

    def __init__(self, tok):
        self._tok = tok

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids))


@lru_cache(maxsize=1)
def qwen_vocab() -> GgufVocab:
    """The Qwen2/Qwen3 vocabulary from the shipped GGUF (assembled once, checksum-verified)."""
    from .shipped import shipped_gguf

    return GgufVocab(str(shipped_gguf()))


def word_counter(tok: Tokenizer):
    """Tokens one whitespace-free word costs in running text (BPE: with its leading space)."""
    return lambda word: len(tok.encode(" " + word))
