"""Text-completion processor: picks the flow's model backend and serves completions."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Literal

from pydantic import BaseModel

from processors.base.errors import ServiceError
from processors.base.metrics import TOKENS
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import flow_params
from processors.text_completion.backend import ChatMessage, CompletionOptions, LLMBackend, LLMError
from schemas.text_completion import TextCompletionRequest, TextCompletionResponse

NOT_CONFIGURED = (
    "No language model is configured. Set KGFLOW_LLM=openai (with KGFLOW_LLM_MODEL, "
    "KGFLOW_LLM_BASE_URL, KGFLOW_LLM_API_KEY) or KGFLOW_LLM=local, or the flow parameter `llm`."
)


class LLMParams(BaseModel):
    """Which model answers, and how (flow parameters; environment fills what is unset)."""

    llm: Literal["none", "local", "openai"] = "none"
    llm_model: str | None = None
    llm_base_url: str | None = None
    llm_api_key: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    llm_timeout: float = 120.0

    @classmethod
    def resolve(cls, parameters: dict[str, object]) -> LLMParams:
        """Flow parameters first, then KGFLOW_LLM* / OPENAI_API_KEY environment variables."""
        merged: dict[str, object] = {
            "llm": os.environ.get("KGFLOW_LLM"),
            "llm_model": os.environ.get("KGFLOW_LLM_MODEL"),
            "llm_base_url": os.environ.get("KGFLOW_LLM_BASE_URL"),
            "llm_api_key": os.environ.get("KGFLOW_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY"),
        }
        merged = {k: v for k, v in merged.items() if v}
        merged.update({k.replace("-", "_"): v for k, v in parameters.items() if v is not None})
        return flow_params(cls, merged)


def make_backend(p: LLMParams) -> LLMBackend | None:
    """The backend `p` names (None for `llm=none`)."""
    if p.llm == "none":
        return None
    if p.llm == "openai":
        from processors.text_completion.openai_backend import OpenAIBackend

        if not p.llm_model:
            raise ValueError("llm=openai needs llm-model (KGFLOW_LLM_MODEL)")
        return OpenAIBackend(p.llm_model, p.llm_base_url, p.llm_api_key)
    from processors.text_completion.local_backend import LocalLlamaBackend

    return LocalLlamaBackend()


class TextCompletionProcessor(FlowProcessor):
    """Serves `text-completion` (streaming when asked)."""

    name = "text-completion"

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec("text-completion", TextCompletionRequest, TextCompletionResponse, self.complete)]

    async def on_flow_start(self, flow: FlowContext) -> None:
        params = LLMParams.resolve(flow.parameters)
        flow.state = (params, make_backend(params))

    async def complete(self, req: TextCompletionRequest, flow: FlowContext) -> AsyncIterator[TextCompletionResponse]:
        """Answer with the whole completion, or stream it piece by piece."""
        params, backend = flow.state
        if backend is None:
            yield TextCompletionResponse(response=NOT_CONFIGURED, configured=False)
            return
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
                _count(c.model, c.in_token, c.out_token)
                yield TextCompletionResponse(response=c.text, model=c.model, in_token=c.in_token, out_token=c.out_token)
                return
            async for ch in backend.stream(messages, opts):
                if ch.final:
                    _count(ch.model, ch.in_token, ch.out_token)
                    yield TextCompletionResponse(
                        response=ch.text,
                        model=ch.model,
                        in_token=ch.in_token,
                        out_token=ch.out_token,
                        end_of_stream=True,
                    )
                elif ch.text:
                    yield TextCompletionResponse(response=ch.text, end_of_stream=False)
        except LLMError as e:
            raise ServiceError(e.type, e.message) from e


def _count(model: str, in_tok: int, out_tok: int) -> None:
    TOKENS.labels(model, "in").inc(in_tok)
    TOKENS.labels(model, "out").inc(out_tok)
