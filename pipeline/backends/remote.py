"""Remote backends: the three models behind OpenAI-compatible HTTP servers.

Written against vLLM's server (``vllm serve``) and usable with any server that
speaks the same API; each stage has its own base URL (ending in ``/v1``) and
model name, all from settings (``PDFQA_EMBED_URL``, ``PDFQA_EMBED_MODEL``, …,
``PDFQA_API_KEY``):

* embedder — ``POST {embed_url}/embeddings`` (OpenAI schema); queries get
  ``settings.remote.embed_query_prefix``; vectors are L2-normalised here;
* reranker — vLLM's rerank API (Jina / Cohere schema: ``results[].index,
  relevance_score``) or its score API (``data[].index, score``), both at the
  server root, ``POST /rerank`` and ``POST /score``, as vLLM documents them
  (``/v1/rerank`` and ``/v1/score`` are deprecated aliases that log a warning,
  ``/v1/score`` on every request); the query is the question with its
  six options, each document a chunk, both wrapped in the Qwen3-Reranker prompt
  template here (vLLM's rerank request has no field for an instruction); each
  document cut so its pair fits ``rerank_max_len`` (special tokens counted, a
  margin kept): one pair over the server's max_model_len fails the whole request;
* answerer — ``POST {answer_url}/completions`` with ``max_tokens=1`` and the
  log-probabilities of the six letter tokens: vLLM's ``logprob_token_ids`` and
  ``allowed_token_ids`` give exactly those six; other servers (llama.cpp) get a
  ``logit_bias`` on the six and are read from their top ``answer_top_logprobs``.
  The letters are renormalised over the six.
* free text (``base.Answerer``'s interface, for free-form answers), also on
  ``{answer_url}/completions``: greedy ``generate`` (``temperature=0``,
  ``stop``); ``yes_log_odds`` from the first token's top
  ``answer_top_logprobs``; ``continuation_logprobs`` from the echoed prompt
  (``echo``, ``logprobs=1``, the generated token left out), the continuation's
  tokens found by their texts (character offsets are not usable: llama-cpp-python
  leaves special tokens out of them). A server whose echoed
  log-probabilities disagree with those it reports when generating is refused
  for continuations (llama-cpp-python's server shifts them by one token:
  abetlen/llama-cpp-python#1983). Tokens are counted on the local Qwen
  vocabulary.

Every pipeline shares one HTTP client per server (:class:`HttpClients`, owned
by ``pipeline.backends.registry.Models`` and closed on shutdown).

A server that cannot be reached, times out, closes the connection or answers
with an error or a malformed reply raises :class:`BackendError` (a timeout:
its subclass :class:`BackendTimeout`) whose message names the server's URL and
what went wrong, e.g. ``answer server at http://h:8000/v1/completions did not
answer within 60 s``.
"""
from __future__ import annotations

import json
import logging
import threading
import time

import numpy as np

from ..errors import BackendError, BackendTimeout, BackendUnsupported
from ..prompts import (embed_query, fit_to_context, letter_prompt, letter_texts, letter_token_ids, renormalise,
                       rerank_document_part, rerank_pairs, rerank_query_part)
from ..settings import Settings
from ..types import LETTERS, Candidate, Question
from .base import NO, YES, Answerer, Embedder, Prompt, Reranker, Scores, l2_normalise, prompt_text, top_log_odds
from .vocab import qwen_vocab, word_counter

log = logging.getLogger(__name__)


def _root(url: str) -> str:
    """The server root of a base URL (vLLM's /tokenize is not under /v1)."""
    url = url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


class HttpClients:
    """One keep-alive ``httpx.Client`` per server (its URL's root), shared by every backend; ``close`` ends them."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._clients: dict[str, object] = {}
        self._lock = threading.Lock()

    def client(self, base_url: str):
        import httpx

        key = _root(base_url)
        with self._lock:
            if key not in self._clients:
                s = self.settings
                headers = {"Content-Type": "application/json"}
                if s.remote.api_key is not None:
                    headers["Authorization"] = f"Bearer {s.remote.api_key.get_secret_value()}"
                timeout = httpx.Timeout(s.remote.remote_timeout, connect=min(s.remote.remote_timeout, 10.0))
                self._clients[key] = httpx.Client(headers=headers, timeout=timeout)
            return self._clients[key]

    def http(self, base_url: str | None, what: str, setting: str) -> "Http":
        return Http(base_url, what, self.settings, setting, clients=self)

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()


class Http:
    """JSON over HTTP to one server: keep-alive, a timeout, errors as :class:`BackendError`."""

    def __init__(self, base_url: str | None, what: str, settings: Settings, setting: str,
                 clients: HttpClients | None = None):
        import httpx

        if not base_url:
            raise BackendError(f"no URL for the {what} server: set PDFQA_{setting.upper()}")
        self.base = base_url.rstrip("/")
        self.what = what
        self.timeout = settings.remote.remote_timeout
        self._httpx = httpx
        self._client = (clients or HttpClients(settings)).client(self.base)

    def post(self, path: str, body: dict, base: str | None = None) -> dict:
        url = f"{base or self.base}{path}"
        httpx = self._httpx
        try:
            r = self._client.post(url, content=json.dumps(body, ensure_ascii=False).encode("utf-8"))
        except httpx.TimeoutException:
            raise BackendTimeout(f"{self.what} server at {url} did not answer within {self.timeout:g} s") from None
        except httpx.ConnectError as e:
            raise BackendError(f"{self.what} server at {url} cannot be reached: {e or type(e).__name__}") from None
        except httpx.HTTPError as e:  # e.g. the server closed the connection without answering
            raise BackendError(f"{self.what} server at {url} failed: {e or type(e).__name__}") from None
        if r.status_code >= 400:
            raise BackendError(f"{self.what} server at {url} answered HTTP {r.status_code}: {_error_text(r)}")
        try:
            return r.json()
        except ValueError:
            raise BackendError(f"{self.what} server at {url} answered with something that is not JSON: "
                               f"{r.text[:200]!r}") from None

    def close(self) -> None:
        self._client.close()


def _error_text(r) -> str:
    try:
        j = r.json()
        err = j.get("error", j.get("detail", j)) if isinstance(j, dict) else j
        if isinstance(err, dict):
            err = err.get("message", err)
        return str(err)[:300]
    except ValueError:
        return r.text[:300] or r.reason_phrase


def _expect(cond: bool, http: Http, path: str, got, base: str | None = None) -> None:
    if not cond:
        raise BackendError(f"{http.what} server at {base or http.base}{path} sent an unexpected response: "
                           f"{str(got)[:300]}")


# ---- embedder ------------------------------------------------------------------
class RemoteEmbedder(Embedder):
    def __init__(self, settings: Settings, http: Http | None = None):
        self.settings = settings
        self.http = http or Http(settings.roles.embed_url, "embedding", settings, "embed_url")
        self.model = settings.roles.embed_model
        if settings.remote.embed_tokenizer == "e5":
            from .e5 import e5_word_counter

            self._count = e5_word_counter()
        else:
            self._count = word_counter(qwen_vocab())

    @classmethod
    def from_settings(cls, settings: Settings, shared: HttpClients | None = None) -> "RemoteEmbedder":
        return cls(settings, shared.http(settings.roles.embed_url, "embedding", "embed_url") if shared else None)

    def _embed(self, texts: list[str], kind: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        body = {"model": self.model, "input": list(texts), "encoding_format": "float"}
        if self.settings.remote.embed_input_type:
            body["input_type"] = kind
        got = self.http.post("/embeddings", body)
        data = got.get("data") if isinstance(got, dict) else None
        _expect(isinstance(data, list) and len(data) == len(texts), self.http, "/embeddings", got)
        rows = sorted(data, key=lambda d: d.get("index", 0))
        return l2_normalise([r["embedding"] for r in rows])

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._embed(list(texts), "passage")

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed([embed_query(self.settings, t) for t in texts], "query")

    def count_word_tokens(self, word: str) -> int:
        return self._count(word)


# ---- reranker ------------------------------------------------------------------
class RemoteReranker(Reranker):
    def __init__(self, settings: Settings, http: Http | None = None):
        self.settings = settings
        self.http = http or Http(settings.roles.rerank_url, "reranking", settings, "rerank_url")
        self.model = settings.roles.rerank_model
        self.vocab = qwen_vocab()  # counting for the cut: exact for Qwen-family rerankers, an estimate for others

    @classmethod
    def from_settings(cls, settings: Settings, shared: HttpClients | None = None) -> "RemoteReranker":
        return cls(settings, shared.http(settings.roles.rerank_url, "reranking", "rerank_url") if shared else None)

    # tokens kept free under rerank_max_len: special tokens the server adds to a (query, document) pair, and
    # differences between the local vocabulary and the served model's
    RERANK_MARGIN = 16

    def fit(self, query_part: str, doc: str) -> str:
        """The document part for ``doc``, cut so that query + document (special tokens counted, as the server's
        tokenizer parses them) fit ``rerank_max_len`` less :attr:`RERANK_MARGIN`: a server refuses the whole
        request (HTTP 400) when one pair is longer than its max_model_len, as the in-process engine would."""
        count = lambda t: len(self.vocab.encode(t))  # noqa: E731
        budget = self.settings.roles.rerank_max_len - self.RERANK_MARGIN - count(query_part)
        return fit_to_context([doc], lambda ds: rerank_document_part(ds[0]), count, max(budget, 1))

    def request(self, q: Question, candidates: list[Candidate]) -> tuple[str, dict]:
        """The endpoint (at the server root) and body for one question's candidates (each document cut to fit)."""
        s = self.settings
        query, docs = rerank_pairs(q, candidates)
        query = rerank_query_part(s.rerank.rerank_instruction, query)
        docs = [self.fit(query, d) for d in docs]
        body: dict = {"model": self.model}
        if s.remote.rerank_api == "rerank":
            body.update(query=query, documents=docs, top_n=len(docs))
            return "/rerank", body
        body.update(text_1=query, text_2=docs)
        return "/score", body

    def score(self, q: Question, candidates: list[Candidate]) -> list[float]:
        if not candidates:
            return []
        path, body = self.request(q, candidates)
        root = _root(self.http.base)
        got = self.http.post(path, body, base=root)
        key, field = ("results", "relevance_score") if path == "/rerank" else ("data", "score")
        items = got.get(key) if isinstance(got, dict) else None
        _expect(isinstance(items, list) and len(items) == len(candidates), self.http, path, got, root)
        out = [None] * len(candidates)
        for it in items:
            i = it.get("index") if isinstance(it, dict) else None
            _expect(isinstance(i, int) and 0 <= i < len(out) and isinstance(it.get(field), (int, float)),
                    self.http, path, it, root)
            out[i] = float(it[field])
        _expect(all(x is not None for x in out), self.http, path, got, root)
        return out


# ---- answerer ------------------------------------------------------------------
def check_prompt_logprobs(settings: Settings, n_tokens: int, where: str) -> None:
    """Refuse (:class:`BackendUnsupported`) asking log-probabilities of every token of a prompt longer than
    ``prompt_logprobs_max_tokens``: vLLM computes full-vocabulary logits for each such token outside its memory
    profiling (~7.5 GiB at 8,192 tokens, vllm PR #52054), which can kill a T4 engine."""
    cap = settings.remote.prompt_logprobs_max_tokens
    if cap and n_tokens > cap:
        raise BackendUnsupported(
            f"{where}: scoring continuations needs the log-probability of every prompt token, and this prompt has "
            f"{n_tokens} tokens, over prompt_logprobs_max_tokens={cap} (profile {settings.profile!r}): vLLM would "
            f"compute full-vocabulary logits for each of them outside its memory plan (vllm PR #52054). Use "
            f"free_mode=generate, or raise PDFQA_PROMPT_LOGPROBS_MAX_TOKENS where the GPU has room")


class RemoteAnswerer(Answerer):
    """One completion token, restricted to the six letters; their log-probabilities renormalised."""

    def __init__(self, settings: Settings, http: Http | None = None):
        if settings.answer.scorer != "letter":
            raise ValueError(f"the remote answerer scores letters only (scorer={settings.answer.scorer!r}): set scorer=letter")
        self.settings = settings
        self.http = http or Http(settings.roles.answer_url, "answer", settings, "answer_url")
        self.model = settings.roles.answer_model
        self.vocab = qwen_vocab()  # prompt budgeting: exact for Qwen-family models, an estimate for others
        self._count = lambda text: len(self.vocab.encode(text))
        self.letter_ids = self._letter_ids()
        self._ids = {tid: L for tid, L in zip(self.letter_ids, LETTERS)}
        self._texts = {t: L for t, L in zip(letter_texts(), LETTERS)}
        self._keys: dict[tuple[str, ...], set[str]] = {}
        self._echo_problem: str | None = None  # check_echo's finding ("" = fine)

    @classmethod
    def from_settings(cls, settings: Settings, shared: HttpClients | None = None) -> "RemoteAnswerer":
        return cls(settings, shared.http(settings.roles.answer_url, "answer", "answer_url") if shared else None)

    def _server_tokenize(self, text: str) -> list[int] | None:
        """The served model's own token ids: vLLM's /tokenize, else llama.cpp's /extras/tokenize."""
        root = _root(self.http.base)
        for path, body, key in (("/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False},
                                 "tokens"),
                                ("/extras/tokenize", {"input": text}, "tokens")):
            try:
                got = self.http.post(path, body, base=root)
            except BackendError as e:
                if "HTTP 404" in str(e) or "HTTP 405" in str(e):
                    continue
                raise
            if isinstance(got, dict) and isinstance(got.get(key), list):
                return got[key]
        return None

    def _served_ids(self, texts: list[str]) -> list[list[int]] | None:
        """The served model's token ids of each text (a prefix they all share, a BOS some servers add, dropped);
        None when the server has no tokenize endpoint."""
        got = [self._server_tokenize(t) for t in texts]
        if not all(got):
            return None
        n = 0
        while all(len(g) > n + 1 for g in got) and len({g[n] for g in got}) == 1:
            n += 1
        return [g[n:] for g in got]

    def _letter_ids(self) -> list[int]:
        got = self._served_ids(letter_texts())
        if got:
            return letter_token_ids(dict(zip(letter_texts(), got)).__getitem__)
        log.warning("the answer server has no tokenize endpoint: letter ids from the local Qwen vocabulary")
        return letter_token_ids(self.vocab.encode)

    def prompt(self, q: Question, evidence: list[Candidate]) -> str:
        return letter_prompt(q, evidence, self.settings, self._count)

    def request(self, prompt: str) -> dict:
        ids = self.letter_ids
        return {
            "model": self.model, "prompt": prompt, "max_tokens": 1, "temperature": 0.0,
            "logprobs": max(len(ids), self.settings.remote.answer_top_logprobs),
            "logit_bias": {str(i): 100 for i in ids},
            # vLLM: exactly these tokens may come, and their log-probabilities are returned
            "allowed_token_ids": ids, "logprob_token_ids": ids, "return_tokens_as_token_ids": True,
        }

    def top_logprobs(self, got: dict) -> dict[str, float]:
        """The first generated token's top log-probabilities in a completions response (token text, or vLLM's
        ``token_id:N`` → log-probability)."""
        try:
            top = got["choices"][0]["logprobs"]["top_logprobs"][0] or {}
            return {str(t): float(lp) for t, lp in top.items() if lp is not None}
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            raise BackendError(f"answer server at {self.http.base}/completions returned no log-probabilities: "
                               f"{str(got)[:300]}") from None

    def letter_logprobs(self, got: dict) -> dict[str, float]:
        """Log-probabilities of the letters in a completions response (vLLM or llama.cpp shapes)."""
        top = self.top_logprobs(got)
        out: dict[str, float] = {}
        for tok, lp in top.items():
            L = None
            if tok.startswith("token_id:") and tok[9:].isdigit():  # vLLM, return_tokens_as_token_ids
                L = self._ids.get(int(tok[9:]))
            else:
                L = self._texts.get(tok)
            if L and lp > -1e30:
                out[L] = max(out.get(L, -np.inf), lp)
        if not out:
            raise BackendError(f"answer server at {self.http.base}/completions returned no log-probability "
                               f"for any of the letters A–F: {str(top)[:300]}")
        if len(out) < 6 and top:  # outside the server's top N: at most the smallest returned value
            floor = min(top.values())
            out = {L: out.get(L, floor) for L in LETTERS}
        return out

    def score(self, q: Question, evidence: list[Candidate], scorer: str | None = None) -> Scores:
        if (scorer or "letter") != "letter":
            raise ValueError("the remote answerer scores letters only")
        t0 = time.perf_counter()
        prompt = self.prompt(q, evidence)
        got = self.http.post("/completions", self.request(prompt))
        probs = renormalise(self.letter_logprobs(got), q)
        usage = got.get("usage")
        n = (usage.get("prompt_tokens") if isinstance(usage, dict) else None) or self._count(prompt)
        return Scores(probs, dict(probs), {}, int(n), time.perf_counter() - t0)

    # ---- free text (base.Answerer) ---------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return self._count(text)

    def _complete(self, body: dict) -> dict:
        """POST /completions (greedy) and its first choice."""
        got = self.http.post("/completions", {"model": self.model, "temperature": 0.0, **body})
        choices = got.get("choices") if isinstance(got, dict) else None
        _expect(isinstance(choices, list) and choices and isinstance(choices[0], dict), self.http, "/completions",
                got)
        return choices[0]

    def generate(self, prompt: Prompt, max_tokens: int, stop: list[str] | None = None) -> str:
        stop = [x for x in stop or [] if x]
        body: dict = {"prompt": prompt_text(prompt), "max_tokens": max_tokens}
        if stop:
            body["stop"] = stop
        text = self._complete(body).get("text")
        _expect(isinstance(text, str), self.http, "/completions", text)
        return text[: min((i for i in map(text.find, stop) if i >= 0), default=len(text))]

    def _word_keys(self, words) -> set[str]:
        """How the first token of each word shows in ``top_logprobs``: vLLM's ``token_id:N`` and its text."""
        words = list(words)
        if tuple(words) not in self._keys:
            served = self._served_ids(words) or [self.vocab.encode(w) for w in words]
            texts = {self.vocab.decode(self.vocab.encode(w)[:1]) for w in words}
            self._keys[tuple(words)] = {f"token_id:{ids[0]}" for ids in served} | texts
        return self._keys[tuple(words)]

    def yes_log_odds(self, prompt: Prompt, yes=YES, no=NO) -> float:
        """From the first token's top ``answer_top_logprobs`` (``base.top_log_odds``)."""
        keys_yes, keys_no = self._word_keys(yes), self._word_keys(no)
        top = self.top_logprobs({"choices": [self._complete({
            "prompt": prompt_text(prompt), "max_tokens": 1, "logprobs": self.settings.remote.answer_top_logprobs,
            "return_tokens_as_token_ids": True})]})
        return top_log_odds(top, keys_yes, keys_no)

    def _echoed(self, prompt: str, continuation: str) -> list[float]:
        """The log-probabilities the server echoes for the tokens of ``continuation`` read after ``prompt``: the last
        echoed prompt tokens, whose texts make up the continuation."""
        check_prompt_logprobs(self.settings, self._count(prompt + continuation), f"answer server at {self.http.base}")
        got = self.http.post("/completions", {"model": self.model, "temperature": 0.0, "prompt": prompt + continuation,
                                              "max_tokens": 1, "echo": True, "logprobs": 1})
        try:  # the prompt's tokens come first (vLLM adds the generated one, llama-cpp-python does not)
            lp, n_prompt = got["choices"][0]["logprobs"], got["usage"]["prompt_tokens"]
            tokens, lps = list(lp["tokens"]), list(lp["token_logprobs"])
            end = i = min(len(tokens), int(n_prompt))
        except (KeyError, IndexError, TypeError, ValueError):
            raise BackendUnsupported(f"answer server at {self.http.base}/completions did not echo the prompt's tokens "
                                     f"with their log-probabilities: {str(got)[:300]}") from None
        text = ""
        while i > 0 and len(text) < len(continuation):
            i -= 1
            text = str(tokens[i]) + text
        if text != continuation or len(lps) != len(tokens) or any(x is None for x in lps[i:end]):
            raise BackendUnsupported(
                f"answer server at {self.http.base}/completions did not echo the continuation {continuation!r} as "
                f"its own tokens with log-probabilities (echoed {tokens[max(0, end - 8):end]}), so continuations "
                f"cannot be scored on it")
        return [float(x) for x in lps[i:end]]

    ECHO_PROBE = "1, 2, 3, 4, 5, 6, 7, 8,"

    def check_echo(self) -> None:
        """Raise :class:`BackendUnsupported` unless the server's echoed log-probability of a token equals the
        one it reports when generating that token (after :attr:`ECHO_PROBE`; checked once)."""
        if self._echo_problem is None:
            choice = self._complete({"prompt": self.ECHO_PROBE, "max_tokens": 1, "logprobs": 1})
            try:
                token, generated = choice["text"], float(choice["logprobs"]["token_logprobs"][0])
            except (KeyError, IndexError, TypeError, ValueError):
                raise BackendError(f"answer server at {self.http.base}/completions returned no log-probabilities: "
                                   f"{str(choice)[:300]}") from None
            echoed = self._echoed(self.ECHO_PROBE, token) if token else []
            self._echo_problem = "" if len(echoed) == 1 and abs(echoed[0] - generated) <= 0.5 else (
                f"answer server at {self.http.base}/completions echoes log-probabilities that disagree with those it "
                f"generates ({token!r} after {self.ECHO_PROBE!r}: {generated:.3f} generated, echoed {echoed}); "
                f"llama-cpp-python's server shifts echoed log-probabilities by one token "
                f"(abetlen/llama-cpp-python#1983), so continuations (free_mode=extract) cannot be scored on it: "
                f"use vLLM's server, or free_mode=generate")
        if self._echo_problem:
            raise BackendUnsupported(self._echo_problem)

    def continuation_logprobs(self, prompt: Prompt, continuations: list[str],
                              max_tokens: int | None = None) -> list[list[float]]:
        """One echoed completion per continuation (after :meth:`check_echo`)."""
        self.check_echo()
        text = prompt_text(prompt)
        return [self._echoed(text, c)[:max_tokens] if c else [] for c in continuations]
