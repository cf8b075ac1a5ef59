"""Text completion: language-model backends (none, OpenAI-compatible, local llama.cpp)."""
