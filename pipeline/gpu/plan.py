"""GPU memory arithmetic for the vLLM profiles: weights + KV cache per GPU, from the models' configs.

    python -m pipeline.gpu.plan t4x2 t4x2-paper
    python -m pipeline.gpu.plan t4x2 --gpu-gib 22 --set tensor_parallel=1 --set answer_model=Qwen/Qwen3-8B-AWQ

Inputs are each model's ``config.json`` (layers, hidden size, MLP size, heads,
KV heads, head size, vocabulary, tied embeddings) and the quantisation;
outputs are GiB per GPU with tensor parallelism ``tp`` (layers, embeddings and
the KV heads are split evenly; norms are negligible). vLLM gives each engine
``gpu_memory_utilization`` of every GPU's total memory and fills what its
weights and activation peak leave with KV cache. Each engine's worker on a GPU
also holds a CUDA context and NCCL buffers *outside* that share: vLLM takes its
free-memory snapshot after they exist and refuses to start when the free
memory is below its share ("Free memory on device … is less than desired GPU
memory utilization", ``vllm/v1/worker/gpu_worker.py``). So engines resident
together need ``sum(shares) × GPU + engines × CONTEXT_GIB`` per GPU
(:func:`resident_gib`). The overheads are allowances, not measurements:
``scripts/gpu_check.sh`` measures the real figures on a GPU host.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

GIB = 1024 ** 3
# A T4 has 16 GB; nvidia-smi lists 15,360 MiB, CUDA reports a little less (about 14.6-14.7 GiB) as total.
# 14.56 GiB is taken here, on the safe side; scripts/gpu_check.sh prints the real total.
T4_GIB = 14.56


@dataclass(frozen=True)
class Arch:
    layers: int
    hidden: int
    mlp: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int = 151936
    tied: bool = False  # input embeddings shared with the LM head
    lm_head: bool = True  # embedding and sequence-classification models have none (a 1-row classifier)

    def params(self) -> tuple[int, int]:
        """(parameters in the transformer layers, parameters in embeddings + LM head)."""
        attn = self.hidden * self.heads * self.head_dim * 2 + self.hidden * self.kv_heads * self.head_dim * 2
        layer = attn + 3 * self.hidden * self.mlp
        emb = self.vocab * self.hidden * (1 if self.tied or not self.lm_head else 2)
        return self.layers * layer, emb

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


# config.json of each Qwen3 checkpoint (the Embedding/Reranker models are Qwen3 bases of the same size)
QWEN3 = {
    "0.6B": Arch(28, 1024, 3072, 16, 8, 128, tied=True),
    "4B": Arch(36, 2560, 9728, 32, 8, 128, tied=True),
    "8B": Arch(36, 4096, 12288, 32, 8, 128),
    "14B": Arch(40, 5120, 17408, 40, 8, 128),
    "32B": Arch(64, 5120, 25600, 64, 8, 128),
}

AWQ_BYTES = 0.5 + 2.5 / 128  # 4-bit weights + per-128-group fp16 scale and 4-bit zero point
CONTEXT_GIB = 0.5  # CUDA context, cuBLAS/NCCL workspaces per engine worker, outside its share (allowance)


def arch_of(model: str) -> Arch:
    name = model.rsplit("/", 1)[-1]
    size = next((k for k in sorted(QWEN3, key=len, reverse=True) if f"-{k}" in name), None)
    if size is None:
        raise KeyError(f"no architecture on record for {model!r}")
    a = QWEN3[size]
    if "Embedding" in name or "Reranker" in name:  # no LM head (the reranker's becomes a 1-row classifier)
        a = Arch(a.layers, a.hidden, a.mlp, a.heads, a.kv_heads, a.head_dim, a.vocab, a.tied, lm_head=False)
    return a


@dataclass
class StagePlan:
    stage: str
    model: str
    tp: int
    share: float  # gpu_memory_utilization
    max_len: int
    weights_gib: float  # per GPU
    kv_gib_per_token_k: float  # per GPU, per 1,000 tokens
    activation_gib: float
    gpu_gib: float

    @property
    def budget_gib(self) -> float:
        return self.share * self.gpu_gib

    @property
    def kv_gib(self) -> float:
        return self.budget_gib - self.weights_gib - self.activation_gib

    @property
    def kv_tokens(self) -> int:
        return int(max(0.0, self.kv_gib) / self.kv_gib_per_token_k * 1000)

    @property
    def fits(self) -> bool:
        return self.kv_tokens >= self.max_len  # vLLM refuses an engine whose KV cache cannot hold one sequence


def stage_plan(stage: str, model: str, share: float, max_len: int, tp: int, quantized: bool,
               gpu_gib: float = T4_GIB) -> StagePlan:
    a = arch_of(model)
    layer_p, emb_p = a.params()
    weight_bytes = layer_p * (AWQ_BYTES if quantized else 2) + emb_p * 2
    activation = 1.0 if stage == "answer" else 0.3  # prefill + sampler peak (allowance)
    return StagePlan(stage, model, tp, share, max_len, weight_bytes / tp / GIB,
                     a.kv_bytes_per_token() / tp * 1000 / GIB, activation, gpu_gib)


STAGES = ("embed", "rerank", "answer")


def plan(settings, gpu_gib: float = T4_GIB) -> list[StagePlan]:
    s = settings
    return [stage_plan(st, r.model, r.gpu_memory, r.max_len, s.vllm.tensor_parallel,
                       st == "answer" and (bool(s.vllm.vllm_quantization) or "awq" in r.model.lower()), gpu_gib)
            for st, r in ((st, s.role(st)) for st in STAGES)]


def resident_share(settings) -> float:
    """The share of each GPU the engines take together (all resident) or the largest (one per process)."""
    shares = [settings.role(st).gpu_memory for st in STAGES]
    return max(shares) if settings.vllm.stage_per_process else sum(shares)


def resident_gib(settings, gpu_gib: float = T4_GIB) -> float:
    """GiB per GPU in use at once: the shares plus each resident engine's worker overhead outside its share."""
    engines = 1 if settings.vllm.stage_per_process else len(STAGES)
    return resident_share(settings) * gpu_gib + engines * CONTEXT_GIB


def fits_together(settings, gpu_gib: float = T4_GIB) -> bool:
    """Whether the last engine to start still finds its share free (vLLM's start-up check)."""
    return resident_gib(settings, gpu_gib) <= gpu_gib


def table(settings, gpu_gib: float = T4_GIB) -> str:
    rows = [f"profile {settings.profile}: {settings.vllm.tensor_parallel} GPU(s) x {gpu_gib:.2f} GiB, "
            f"{'one stage per process' if settings.vllm.stage_per_process else 'all engines resident'}, "
            f"share of each GPU in use {resident_share(settings):.2f}, with each engine's worker overhead "
            f"({CONTEXT_GIB:g} GiB) {resident_gib(settings, gpu_gib):.2f} GiB: "
            f"{'starts' if fits_together(settings, gpu_gib) else 'does NOT start (lower the shares)'}",
            "stage   model                          share  budget  weights  act      KV cache  KV/1k tok  "
            "KV tokens  max_len  fits"]
    for p in plan(settings, gpu_gib):
        rows.append(f"{p.stage:7} {p.model:30} {p.share:5.2f} {p.budget_gib:7.2f} {p.weights_gib:8.2f} "
                    f"{p.activation_gib:8.2f} {p.kv_gib:9.2f} {p.kv_gib_per_token_k:10.3f} "
                    f"{p.kv_tokens:10,} {p.max_len:8} {'yes' if p.fits else 'NO'}")
    rows.append("(GiB per GPU; weights from config.json; activation and worker overhead are allowances)")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    import argparse

    from ..settings import load_settings, parse_overrides

    ap = argparse.ArgumentParser(prog="python -m pipeline.gpu.plan", description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="*", default=["t4x2", "t4x2-paper"])
    ap.add_argument("--gpu-gib", type=float, default=T4_GIB, help=f"usable GiB per GPU (T4: {T4_GIB})")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    a = ap.parse_args(argv)
    for name in a.profiles:
        print(table(load_settings(name, **parse_overrides(a.set)), a.gpu_gib), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
