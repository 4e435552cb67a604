"""llama-cpp-python's OpenAI-compatible server, loading its model as the llama.cpp backend does.

    python -m pipeline.backends.llama_server --model MODEL.gguf --port 8000 ...

Same arguments as ``python -m llama_cpp.server``; the one difference is llama.cpp's extra weight
buffers, kept off where they crash (``llama_cpp.use_extra_buffers``, ``llama_defaults``; ``PDFQA_LLAMA_EXTRA_BUFFERS``).
"""
from __future__ import annotations

import os
import runpy

from .llama_cpp import llama_defaults, use_extra_buffers

if __name__ == "__main__":
    from .ggml_cpu import load

    load()  # a portable build's CPU kernels registered before the server loads its model
    with llama_defaults(use_extra_buffers(os.environ.get("PDFQA_LLAMA_EXTRA_BUFFERS", "auto"))):
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
