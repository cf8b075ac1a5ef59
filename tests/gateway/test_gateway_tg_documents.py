"""TrustGraph's document path against `kgflow up`: its Python API's `load_text`, then the real
`tg-invoke-document-rag`, `tg-list-collections` and `tg-delete-collection` commands."""

from __future__ import annotations

import base64
import uuid

import pytest
import requests
from gw_support import UpServer
from test_gateway_tg_cli import tg
from trustgraph.api import Api
from trustgraph.api.exceptions import ProtocolException

RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
LIGHTHOUSE = (
    "The Skerry Light was built in 1858 on a rock off the coast of Arnholm. Its keeper, Maren Tofte, "
    "kept the lamp burning through the winter storm of 1871 and logged every ship that passed."
)
ORCHARD = "The Valdren orchard grows quince and medlar trees. It is watered by a canal dug in 1902."


def _load(url: str, collection: str, doc_id: str, title: str, text: str) -> None:
    flow = Api(url).flow().id("default")
    metadata = [{"s": {"t": "i", "i": doc_id}, "p": {"t": "i", "i": RDFS_LABEL}, "o": {"t": "l", "v": title}}]
    # Api.load_text wants metadata as an object with emit(); the wire it sends carries compact triples
    flow.request(
        "service/text-load",
        {"id": doc_id, "metadata": metadata, "charset": "utf-8", "text": _b64(text), "collection": collection},
    )


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_trustgraph_document_path(up_2h: UpServer) -> None:
    collection = f"tgdocs-{uuid.uuid4().hex[:8]}"
    _load(up_2h.url, collection, "skerry", "The Skerry Light", LIGHTHOUSE)
    _load(up_2h.url, collection, "valdren", "Valdren orchard", ORCHARD)
    # the same text again is a no-op, and Api.flow().load_text (TrustGraph's own call) works too
    assert Api(up_2h.url).flow().id("default").load_text(text=ORCHARD.encode(), id="valdren", collection=collection)

    question = "Who kept the lamp of the Skerry Light?"
    out = tg("tg-invoke-document-rag", "-u", up_2h.url, "-q", question, "-C", collection)
    assert "Maren Tofte" in out, out
    out = tg(
        "tg-invoke-document-rag", "-u", up_2h.url, "-q", "What trees grow in the orchard?", "-C", collection,
        "--no-streaming", "-d", "1",
    )  # fmt: skip
    assert "quince" in out and "Maren" not in out, out  # doc-limit 1: one chunk of context

    listed = tg("tg-list-collections", "-u", up_2h.url)
    row = next(line for line in listed.splitlines() if collection in line)
    assert "2 documents" in row, listed

    tg("tg-delete-collection", "-u", up_2h.url, "-y", collection)
    assert collection not in tg("tg-list-collections", "-u", up_2h.url)
    out = tg("tg-invoke-document-rag", "-u", up_2h.url, "-q", "Who kept the lamp?", "-C", collection)
    assert "Maren" not in out and "Nothing" in out, out


def test_trustgraph_load_of_non_text_is_refused(up_2h: UpServer) -> None:
    body = {"id": "scan", "data": base64.b64encode(b"%PDF-1.7\n\xff\xfe\x00binary").decode(), "collection": "tgbad"}
    r = requests.post(f"{up_2h.url}/api/v1/flow/default/service/document-load", json=body, timeout=60)
    assert r.status_code == 400 and "document scan: a corrupt PDF" in r.json()["error"]["message"], r.text
    with pytest.raises(ProtocolException, match="400"):  # TrustGraph's client shows the status only
        Api(up_2h.url).flow().id("default").load_document(document=b"\xff\xfe\x00", id="scan", collection="tgbad")
    r = requests.post(
        f"{up_2h.url}/api/v1/collection-management",
        json={"operation": "update-collection", "collection": "tgbad", "name": "x"},
        timeout=60,
    )
    assert r.status_code == 200 and r.json()["error"]["type"] == "not-supported", r.text  # shown by TrustGraph's CLI
    assert "not supported by kgflow" in r.json()["error"]["message"]
    assert "tgbad" not in tg("tg-list-collections", "-u", up_2h.url)  # nothing was stored


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"id": "nul\x00id", "text": _b64("Some text.")}, ("document.id:", "may not contain control characters")),
        ({"id": "blank", "text": _b64("  \n ")}, ("document.text:", "a document needs text")),
        (
            {"id": "meta", "text": _b64("Some text."), "metadata": {"k": "v"}},
            ("metadata:", "expected a list of triples"),
        ),
    ],
)
def test_trustgraph_text_load_refuses_a_bad_document_as_a_bad_request(
    up_2h: UpServer, body: dict[str, object], message: tuple[str, str]
) -> None:
    r = requests.post(f"{up_2h.url}/api/v1/flow/default/service/text-load", json=body | {"collection": "tgbad"},
                      timeout=60)  # fmt: skip
    assert r.status_code == 400 and r.json()["error"]["type"] == "bad-request", r.text
    field, why = message  # the field named, then the reason
    assert f"invalid request: {field}" in r.json()["error"]["message"] and why in r.json()["error"]["message"], r.text
