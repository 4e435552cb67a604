"""Optional backends: registered only when their module imports (as in AnswerDotAI/rerankers).

The CPU backends live next to their base classes. The others live one file per
family and join the registries on first use, so nothing imports them (or their
dependencies) unless a profile asks for them:

* ``remote`` — ``pipeline.remote``: OpenAI-compatible HTTP servers (vLLM's ``vllm serve`` or any server
  with the same API);
* ``vllm`` — ``pipeline.vllm_backend``: vLLM engines in this process (GPU hosts, ``requirements-gpu.txt``).
"""
from __future__ import annotations

import importlib

OPTIONAL: dict[str, dict[str, tuple[str, str]]] = {
    "embedder": {"remote": ("pipeline.remote", "RemoteEmbedder"), "vllm": ("pipeline.vllm_backend", "VllmEmbedder")},
    "reranker": {"remote": ("pipeline.remote", "RemoteReranker"), "vllm": ("pipeline.vllm_backend", "VllmReranker")},
    "answerer": {"remote": ("pipeline.remote", "RemoteAnswerer"), "vllm": ("pipeline.vllm_backend", "VllmAnswerer")},
}


class BackendUnavailable(ImportError):
    pass


def register_optional(kind: str, registry: dict) -> dict:
    """Add every optional backend of ``kind`` whose module imports to ``registry``."""
    for name, (module, cls) in OPTIONAL[kind].items():
        if name not in registry:
            try:
                registry[name] = getattr(importlib.import_module(module), cls)
            except ImportError:
                pass
    return registry


def optional_backend(kind: str, name: str, registry: dict):
    register_optional(kind, registry)
    if name not in registry:
        module = OPTIONAL.get(kind, {}).get(name, ("?",))[0]
        raise BackendUnavailable(f"the {kind} backend {name!r} is not available here ({module} does not import)")
    return registry[name]
