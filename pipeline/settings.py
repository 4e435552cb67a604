"""One typed settings object with named profiles.

A profile is a named set of defaults (``cpu`` is the default). Environment
variables prefixed ``PDFQA_`` and explicit overrides (e.g. from the command
line) win over the profile::

    s = load_settings("cpu", top_k_answer=3)
    PDFQA_TOP_K_ANSWER=3 python -m pipeline.evaluate ...
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PDFQA_", extra="forbid")

    profile: str = "cpu"
    data_dir: Path = Path("data")

    # ingest
    max_pages: int = 2000
    repeated_line_share: float = Field(0.6, description="a line on this share of pages is a running header/footer")

    # chunking (counted in the embedder's own tokens)
    prefix_tokens: int = 128
    chunk_tokens: int = 512
    chunk_overlap: int = 64
    use_prefix: bool = True

    # embedding
    embedder: Literal["e5"] = "e5"
    embed_batch: int = 16

    # retrieval
    lexical_norm: Literal["lemma", "prefix6", "none"] = "prefix6"
    retrieval: Literal["dense", "bm25", "hybrid"] = "hybrid"
    dense_weight: float = 0.7
    query_with_options: bool = True
    query_instruction: str = "Знайди фрагмент документа, який відповідає на запитання"
    top_k_retrieve: int = 20
    pool_k: int = 60

    # reranking
    reranker: Literal["options", "none"] = "options"
    rerank_option_weight: float = 0.5
    top_k_answer: int = 2
    neighbours: bool = False

    # answering
    answerer: Literal["llama-cpp"] = "llama-cpp"
    scorer: Literal["letter", "option", "combined"] = "option"
    option_temperature: float = 0.2
    n_ctx: int = 4096
    n_threads: int = 0  # 0 = all cores
    passage_tokens: int = 420  # each passage cut to its best-matching run of lines (answer model's tokens); 0 = whole
    retry_below: float = 0.0  # retry with wider evidence when the best probability is below; 0 = off
    retry_top_k: int = 4

    def fingerprint(self) -> str:
        """What decides the content of an index: chunks and embeddings."""
        return (f"{self.embedder}-p{self.prefix_tokens if self.use_prefix else 0}"
                f"-c{self.chunk_tokens}-o{self.chunk_overlap}")


# e5 reads at most 512 tokens: prefix (128) + heading path + body must fit.
PROFILES: dict[str, dict[str, Any]] = {
    "cpu": dict(chunk_tokens=320, chunk_overlap=64, prefix_tokens=128),
}


def load_settings(profile: str | None = None, **overrides: Any) -> Settings:
    """Settings for a named profile; environment, then ``overrides``, win."""
    name = profile or os.environ.get("PDFQA_PROFILE") or "cpu"
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(sorted(PROFILES))}")
    env_keys = {k[len("PDFQA_"):].lower() for k in os.environ if k.startswith("PDFQA_")}
    base = {k: v for k, v in PROFILES[name].items() if k not in env_keys}
    clean = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**{**base, **clean, "profile": name})
