"""Text-completion processor: picks the flow's model backend and serves completions.

Backend selection, per flow (flow parameters win; the environment fills what a
flow leaves unset; the defaults come last):

| flow parameter  | environment              | meaning                                          |
|-----------------|--------------------------|--------------------------------------------------|
| `llm`           | `KGFLOW_LLM`             | `none` (default), `local` or `openai`            |
| `llm-model`     | `KGFLOW_LLM_MODEL`       | openai: model name (required); local: GGUF path  |
| `llm-base-url`  | `KGFLOW_LLM_BASE_URL`    | openai: endpoint (default OpenAI's)              |
| `llm-api-key`   | `KGFLOW_LLM_API_KEY`, `OPENAI_API_KEY` | openai: key                        |
| `llm-json-mode` | `KGFLOW_LLM_JSON_MODE`   | openai: `auto`, `json_schema` or `json_object`   |
| `temperature`   | `KGFLOW_LLM_TEMPERATURE` | default sampling temperature                     |
| `max-tokens`    | `KGFLOW_LLM_MAX_TOKENS`  | default completion budget                        |
| `llm-timeout`   | `KGFLOW_LLM_TIMEOUT`     | seconds per completion, retries included         |

(The defaults of these three are `CompletionOptions`' in `backend.py`.)
| `llm-max-retries` | `KGFLOW_LLM_MAX_RETRIES` | openai: retries on 429/5xx (4)                 |
| `llm-threads`   | `KGFLOW_LLM_THREADS`     | local: llama.cpp threads (1, see below)          |

`llm-threads` defaults to 1: llama.cpp's worker threads spin-wait on each
other, and on a busy 2-core machine 2 threads measured 0.7-1.3 tokens/s
against 16-23 with 1 thread (SmolLM2-135M); on an idle machine 2 threads are
only modestly faster.

With `llm=none` every request is answered with `configured=False` and a text
saying no model is configured (retrieval services then answer from facts).
A misconfigured backend (e.g. `openai` without a model, `local` without the
`kgflow[local-llm]` extra) does not stop the flow: each request gets a typed
`llm-config` error naming the problem.

Every final response carries `model`, `in_token` and `out_token`; tokens are
counted in the Prometheus counter `kgflow_llm_tokens_total{model,direction}`.
A request's `json_schema` constrains the output (grammar for `local`,
`response_format` for `openai`) and the text is validated against it here (the `jsonschema`
package: every keyword of the schema's draft); a non-conforming result is a `schema-mismatch`
error, a schema that is not valid JSON Schema a `bad-request`.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from processors.base.errors import ServiceError
from processors.base.metrics import TOKENS
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import flow_params
from processors.models.text_completion.backend import ChatMessage, CompletionOptions, LLMBackend, LLMError
from processors.models.text_completion.json_schema import check_schema, parse_and_validate
from schemas.services import TEXT_COMPLETION
from schemas.text_completion import TextCompletionRequest, TextCompletionResponse

NOT_CONFIGURED = (
    "No language model is configured. Set KGFLOW_LLM=openai (with KGFLOW_LLM_MODEL, "
    "KGFLOW_LLM_BASE_URL, KGFLOW_LLM_API_KEY) or KGFLOW_LLM=local, or the flow parameter `llm`."
)
NO_MODEL = "none"

# Field → environment variable(s), first set wins.
ENVIRONMENT: dict[str, tuple[str, ...]] = {
    "llm": ("KGFLOW_LLM",),
    "llm_model": ("KGFLOW_LLM_MODEL",),
    "llm_base_url": ("KGFLOW_LLM_BASE_URL",),
    "llm_api_key": ("KGFLOW_LLM_API_KEY", "OPENAI_API_KEY"),
    "llm_json_mode": ("KGFLOW_LLM_JSON_MODE",),
    "temperature": ("KGFLOW_LLM_TEMPERATURE",),
    "max_tokens": ("KGFLOW_LLM_MAX_TOKENS",),
    "llm_timeout": ("KGFLOW_LLM_TIMEOUT",),
    "llm_max_retries": ("KGFLOW_LLM_MAX_RETRIES",),
    "llm_threads": ("KGFLOW_LLM_THREADS",),
}


class LLMParams(BaseModel):
    """Which model answers, and how (flow parameters; environment fills what is unset)."""

    llm: Literal["none", "local", "openai"] = "none"
    llm_model: str | None = None
    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_json_mode: Literal["auto", "json_schema", "json_object"] = "auto"
    temperature: float = CompletionOptions.temperature
    max_tokens: int = CompletionOptions.max_tokens
    llm_timeout: float = CompletionOptions.timeout_s
    llm_max_retries: int = 4
    llm_threads: int = 1

    @classmethod
    def resolve(cls, parameters: dict[str, object], environ: dict[str, str] | None = None) -> LLMParams:
        """Flow parameters first, then KGFLOW_LLM* / OPENAI_API_KEY environment variables."""
        env = os.environ if environ is None else environ
        merged: dict[str, object] = {}
        for name, variables in ENVIRONMENT.items():
            value = next((env[v] for v in variables if env.get(v)), None)
            if value is not None:
                merged[name] = value
        merged.update({k.replace("-", "_"): v for k, v in parameters.items() if v is not None and v != ""})
        return flow_params(cls, merged)

    def describe(self) -> str:
        """The configuration without secrets, for logs and errors."""
        return f"llm={self.llm} model={self.llm_model or '-'} base_url={self.llm_base_url or '-'}"


def make_backend(p: LLMParams) -> LLMBackend | None:
    """The backend `p` names (None for `llm=none`); raises `LLMError("llm-config")` if it cannot be built."""
    if p.llm == "none":
        return None
    if p.llm == "openai":
        from processors.models.text_completion.openai_backend import OpenAIBackend

        if not p.llm_model:
            raise LLMError("llm-config", "llm=openai needs a model: flow parameter llm-model or KGFLOW_LLM_MODEL")
        return OpenAIBackend(
            p.llm_model, p.llm_base_url, p.llm_api_key, max_retries=p.llm_max_retries, json_mode=p.llm_json_mode
        )
    from processors.models.text_completion.local_backend import INSTALL_HINT, LocalLlamaBackend

    if importlib.util.find_spec("llama_cpp") is None:
        raise LLMError("llm-config", f"llm=local: llama-cpp-python is not installed; {INSTALL_HINT}")
    if p.llm_model and not Path(p.llm_model).is_file():
        raise LLMError("llm-config", f"llm=local: llm-model must be a GGUF file path; {p.llm_model!r} is not a file")
    try:
        return LocalLlamaBackend(p.llm_model, n_threads=p.llm_threads)
    except LLMError as exc:
        raise LLMError("llm-config", f"llm=local: {exc.message}") from exc


@dataclass
class FlowLLM:
    """A flow's model configuration: the backend, or why there is none."""

    params: LLMParams
    backend: LLMBackend | None
    config_error: LLMError | None = None


class TextCompletionProcessor(FlowProcessor):
    """Serves `text-completion` (streaming when asked)."""

    name = TEXT_COMPLETION.name

    def services(self) -> list[ServiceSpec]:
        """The one service: text-completion."""
        return [ServiceSpec(TEXT_COMPLETION, self.complete)]

    async def on_flow_start(self, flow: FlowContext[FlowLLM]) -> None:
        """Resolve the flow's parameters and build its backend once, for the flow's life."""
        try:
            params = LLMParams.resolve(flow.parameters)
        except ValueError as exc:
            flow.state = FlowLLM(LLMParams(), None, LLMError("llm-config", f"text-completion: {exc}"))
            return
        try:
            flow.state = FlowLLM(params, make_backend(params))
        except LLMError as exc:
            flow.state = FlowLLM(params, None, exc)

    async def on_flow_stop(self, flow: FlowContext[FlowLLM]) -> None:
        """Close the backend's connections, if it has any."""
        close = getattr(flow.state.backend, "close", None)
        if close is not None:
            await close()

    async def complete(
        self, req: TextCompletionRequest, flow: FlowContext[FlowLLM]
    ) -> AsyncIterator[TextCompletionResponse]:
        """Answer with the whole completion, or stream it piece by piece (the last carries usage)."""
        state = flow.state
        if state.config_error is not None:
            raise ServiceError(state.config_error.type, state.config_error.message)
        if req.json_schema is not None:  # a schema that is not JSON Schema is refused before any model runs
            try:
                check_schema(req.json_schema)
            except LLMError as e:
                raise ServiceError(e.type, e.message) from None
        backend = state.backend
        if backend is None:
            yield TextCompletionResponse(
                response=NOT_CONFIGURED, configured=False, model=NO_MODEL, in_token=0, out_token=0
            )
            return
        params = state.params
        messages = ([ChatMessage("system", req.system)] if req.system else []) + [ChatMessage("user", req.prompt)]
        opts = CompletionOptions(
            max_tokens=req.max_tokens or params.max_tokens,
            temperature=params.temperature if req.temperature is None else req.temperature,
            json_schema=req.json_schema,
            timeout_s=params.llm_timeout,
        )
        try:
            if not req.streaming:
                c = await backend.complete(messages, opts)
                if req.json_schema is not None:
                    parse_and_validate(c.text, req.json_schema)
                count_tokens(c.model, c.in_token, c.out_token)
                yield TextCompletionResponse(response=c.text, model=c.model, in_token=c.in_token, out_token=c.out_token)
                return
            pieces: list[str] = []
            async for ch in backend.stream(messages, opts):
                if ch.final:
                    pieces.append(ch.text)
                    if req.json_schema is not None:
                        parse_and_validate("".join(pieces), req.json_schema)
                    count_tokens(ch.model, ch.in_token, ch.out_token)
                    yield TextCompletionResponse(
                        response=ch.text,
                        model=ch.model,
                        in_token=ch.in_token,
                        out_token=ch.out_token,
                        end_of_stream=True,
                    )
                    return
                if ch.text:
                    pieces.append(ch.text)
                    yield TextCompletionResponse(response=ch.text, model=ch.model or backend.model, end_of_stream=False)
            raise LLMError("llm-error", f"{backend.model}: the stream ended without a final chunk")
        except LLMError as e:
            raise ServiceError(e.type, e.message) from e


def count_tokens(model: str, in_token: int, out_token: int) -> None:
    """Add a completion's usage to the Prometheus token counters."""
    TOKENS.labels(model, "in").inc(in_token)
    TOKENS.labels(model, "out").inc(out_token)
