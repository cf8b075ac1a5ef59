"""Embeddings: texts to vectors (local MiniLM on onnxruntime, or an OpenAI-compatible endpoint)."""
