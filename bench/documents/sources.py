"""The real material of the document scale corpora (bench/documents/corpus.py), made once and cached.

The public doc-QA sets (HotpotQA, MuSiQue) and the MSFT earnings transcripts run through the real
indexing pipeline (`load_batch`: the chunker, the real MiniLM, the extractor's spaCy pipeline and
concept rules), with a capturing `IngestSources` in place of the bus: what it captures is exactly
what the document-store writer receives. Kept from it:
- the public sets' indexed documents (written into every corpus through the real writer);
- a sentence bank: every chunk of the three sets as its sentences (spaCy's, the ones the
  extractor numbers its mentions by), each with its concept mentions and token count, and the
  chunk's real vector. Distractors are recombined from it.
- a vector for every concept label in the bank (the writer embeds a new concept's label).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.results import DATASETS, ROOT
from processors.ingest.documents.chunker import ChunkingParams
from processors.ingest.documents.pipeline import load_batch
from processors.ingest.extractor.concepts import PIPELINE_PACKAGE, doc_concepts, load_pipeline
from processors.models.embeddings.model import OnnxMiniLM, plain_tokenizer
from schemas.documents import Document, IndexedDocument
from schemas.extraction import ConceptMention

DOCQA = DATASETS / "docqa"
PUBLIC_SETS = {"hotpotqa": DOCQA / "hotpotqa_dev200_migres", "musique": DOCQA / "musique_train100_kag"}
SENTENCE_SETS = {**PUBLIC_SETS, "msft": DOCQA / "msgraphrag_msft_earnings"}
PIPE_BATCH = 64  # as the extractor service


@dataclass
class Sentence:
    """One sentence of a real chunk: its text, token count and concept mentions (sentence 0)."""

    text: str
    tokens: int
    mentions: list[ConceptMention]


@dataclass
class Sources:
    """What the corpora are made of (see the module docstring)."""

    public: dict[str, list[IndexedDocument]]  # set name -> its indexed documents
    bank: list[list[Sentence]]  # per real chunk, its sentences
    bank_sets: list[str]  # per real chunk, the set it came from
    bank_vectors: np.ndarray  # (chunks, 384) float32, the chunks' real vectors
    label_vectors: dict[str, np.ndarray]  # concept label -> its MiniLM vector
    key: str


class CapturingIngest:
    """IngestSources for `load_batch` on the real model and extractor rules; keeps what would be
    stored, and the sentences of every chunk text it extracted from."""

    def __init__(self, nlp: Any) -> None:
        self.nlp = nlp
        self.stored: list[IndexedDocument] = []
        self.sentences: dict[str, list[tuple[str, list[ConceptMention]]]] = {}

    async def hashes(self, ids: list[str]) -> dict[str, str]:
        return {}

    async def begin(self) -> None:  # nothing is stored, so there is no collection to mark
        pass

    async def finish(self) -> None:
        pass

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await OnnxMiniLM.shared().embed(texts)

    async def extract(self, texts: list[str]) -> list[list[ConceptMention]]:
        return await asyncio.to_thread(self._extract, texts)

    def _extract(self, texts: list[str]) -> list[list[ConceptMention]]:
        out = []
        for text, doc in zip(texts, self.nlp.pipe(texts, batch_size=PIPE_BATCH), strict=True):
            # the extractor service's mentions (processors/ingest/extractor/service.py), same pipeline
            found = [ConceptMention(key=c.key, label=c.label, sentence=c.sentence, kind=c.kind, subject=c.subject,
                                    aliases=list(c.aliases)) for c in doc_concepts(doc)]  # fmt: skip
            sents = [s.text.strip() for s in doc.sents]
            self.sentences[text] = [(s, [m for m in found if m.sentence == n]) for n, s in enumerate(sents)]
            out.append(found)
        return out

    async def store(self, documents: list[IndexedDocument]) -> list[str]:
        self.stored += documents
        return []  # nothing was deleted while this load ran

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the scale corpora index without a model")


def _docs(name: str, path: Path, limit: int | None) -> list[Document]:
    """The set's documents; with `limit` (tests), a public set's are the supporting paragraphs of
    its first `limit` questions (so those questions can be asked) and the MSFT set's its first
    `limit` transcripts."""
    lines = [line for line in (path / "corpus.jsonl").read_text().splitlines() if line]
    docs = [Document.model_validate_json(line) for line in lines]
    if limit is None:
        return docs
    if name not in PUBLIC_SETS:
        return docs[:limit]
    rows = [json.loads(x) for x in (path / "questions.jsonl").read_text().splitlines() if x]
    wanted = {i for r in rows[:limit] for i in r["supporting_paragraph_ids"]}
    return [d for d in docs if d.id in wanted]


def sources_key(subset: int | None) -> str:
    """The data files, this module, the chunking defaults, the model, and the indexing and extractor
    packages as a whole (what `load_batch` calls decides what is captured, not `load_batch` alone)."""

    h = hashlib.sha256(json.dumps([subset, ChunkingParams().model_dump(), OnnxMiniLM.model,
                                   PIPELINE_PACKAGE]).encode())  # fmt: skip
    for path in SENTENCE_SETS.values():
        h.update((path / "corpus.jsonl").read_bytes() + (path / "questions.jsonl").read_bytes())
    ingest = ROOT / "processors" / "ingest"
    for f in [
        Path(__file__),
        *sorted((ingest / "documents").glob("*.py")),
        *sorted((ingest / "extractor").glob("*.py")),
    ]:
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


async def prepare_sources(cache_dir: Path, subset: int | None = None, log: Callable[[str], None] = print) -> Sources:
    """The sources (from `cache_dir` when made before); `subset`: a few documents of each set (see `_docs`)."""
    key = sources_key(subset)
    home = cache_dir / f"sources-{key}"
    if not (home / "done").exists():
        home.mkdir(parents=True, exist_ok=True)
        nlp, tokenizer = load_pipeline(), plain_tokenizer()
        bank: list[dict[str, Any]] = []
        vectors: list[list[float]] = []
        for name, path in SENTENCE_SETS.items():
            docs = _docs(name, path, subset)
            capture = CapturingIngest(nlp)
            log(f"[docscale] sources: indexing {len(docs)} documents of {name} through the pipeline")
            report = await load_batch(capture, docs, tokenizer, ChunkingParams())
            if report.failed:
                raise RuntimeError(f"{name}: documents failed to index: {report.failed}")
            if name in PUBLIC_SETS:
                (home / f"indexed-{name}.jsonl").write_text("".join(d.model_dump_json() + "\n" for d in capture.stored))
            for d in capture.stored:
                for c, v in zip(d.chunks, d.vectors, strict=True):
                    bank.append({"set": name, "sentences": _bank(capture.sentences[c.text], tokenizer)})
                    vectors.append(v)
        np.save(home / "bank_vectors.npy", np.asarray(vectors, dtype=np.float32))
        (home / "bank.json").write_text(json.dumps(bank))
        labels = sorted({m[1] for c in bank for s in c["sentences"] for m in s["mentions"]})
        log(f"[docscale] sources: embedding {len(labels)} concept labels")
        np.save(home / "label_vectors.npy", np.asarray(await OnnxMiniLM.shared().embed(labels), dtype=np.float32))
        (home / "labels.json").write_text(json.dumps(labels))
        (home / "done").write_text(key)
    return _read(home, key)


def _bank(sentences: list[tuple[str, list[ConceptMention]]], tokenizer: Any) -> list[dict[str, Any]]:
    """A chunk's sentences as stored in bank.json (mentions as [key, label, kind])."""
    counts = [len(e.ids) for e in tokenizer.encode_batch([s for s, _ in sentences], add_special_tokens=False)]
    return [{"text": s, "tokens": n, "mentions": [[m.key, m.label, m.kind, m.subject, m.aliases] for m in found]}
            for (s, found), n in zip(sentences, counts, strict=True) if s]  # fmt: skip


def _read(home: Path, key: str) -> Sources:
    public = {
        name: [
            IndexedDocument.model_validate_json(x) for x in (home / f"indexed-{name}.jsonl").read_text().splitlines()
        ]
        for name in PUBLIC_SETS
    }
    raw = json.loads((home / "bank.json").read_text())

    def sentence(s: dict[str, Any]) -> Sentence:
        mentions = [ConceptMention(key=k, label=x, kind=kind, subject=sub, aliases=al)
                    for k, x, kind, sub, al in s["mentions"]]  # fmt: skip
        return Sentence(s["text"], s["tokens"], mentions)

    bank = [[sentence(s) for s in c["sentences"]] for c in raw]
    labels = json.loads((home / "labels.json").read_text())
    label_vectors = dict(zip(labels, np.load(home / "label_vectors.npy"), strict=True))
    return Sources(public, bank, [c["set"] for c in raw], np.load(home / "bank_vectors.npy"), label_vectors, key)
