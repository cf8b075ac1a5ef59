"""Text in other scripts is found lexically on SQLite and on the real Neo4j: small Chinese,
Japanese, German and Arabic corpora, each asked in its own script (questions with full-width
punctuation, without Arabic's vowel marks), ranked first by BM25 alone and inside a scope; a
question of emoji or punctuation only searches nothing rather than failing."""

from __future__ import annotations

from processors.stores.documents_protocol import DocumentRecord
from schemas.documents import Scope
from schemas.tenant import Tenant
from tests.integration.doc_store_fixtures import DocBackend, record, search
from tests.integration.store_fixtures import unit

CORPORA: dict[str, list[tuple[str, str]]] = {
    "zh": [
        ("zh-photo", "这张照片是张伟在北京拍摄的。"),
        ("zh-river", "长江是中国最长的河流，流经上海。"),
        ("zh-tea", "绿茶在杭州非常有名，龙井茶最受欢迎。"),
    ],
    "ja": [
        ("ja-photo", "その写真を撮ったのは田中さんです。"),
        ("ja-tower", "東京タワーは港区にある電波塔です。"),
        ("ja-sushi", "寿司は日本の伝統的な料理の一つです。"),
    ],
    "de": [
        ("de-photo", "Das Foto wurde von Jürgen Müller in Köln aufgenommen."),
        ("de-river", "Der Rhein fließt durch Köln und Düsseldorf."),
        ("de-bread", "Das Brot aus der Bäckerei ist frisch."),
    ],
    "ar": [
        ("ar-photo", "الْتَقَطَ أَحْمَدُ الصُّورَةَ فِي القَاهِرَةِ."),
        ("ar-river", "نهر النيل أطول نهر في أفريقيا."),
        ("ar-coffee", "القهوة العربية تقدم مع التمر."),
    ],
}
# (corpus, question, the document it asks about)
QUESTIONS = [
    ("zh", "谁拍摄了照片？", "zh-photo"),
    ("zh", "哪条河流经上海？", "zh-river"),
    ("ja", "写真を撮ったのは誰ですか？", "ja-photo"),
    ("ja", "東京タワーはどこ？", "ja-tower"),
    ("de", "Wer hat das Foto aufgenommen?", "de-photo"),
    ("de", "Welcher Fluss fließt durch Düsseldorf?", "de-river"),
    ("ar", "من التقط الصورة؟", "ar-photo"),
    ("ar", "ما هو أطول نهر في أفريقيا؟", "ar-river"),
]
SILENT = [0.0] * len(unit(1))
NOTHING_TO_SEARCH = ["🔬🧪☢️", "—", "…", "？！", "\u0301"]


async def corpora(docs: DocBackend) -> Tenant:
    """Every corpus in one collection of a fresh tenant (documents of several scripts together)."""
    tenant = Tenant(*docs.scope())
    records: list[DocumentRecord] = [
        record(doc_id, [text], [unit(500 + n)]) for n, (doc_id, text) in enumerate(sum(CORPORA.values(), []))
    ]
    await docs.documents.store(tenant, records)
    return tenant


async def test_a_question_in_any_script_ranks_its_document_first(docs: DocBackend) -> None:
    tenant = await corpora(docs)
    for lang, question, want in QUESTIONS:
        hits = await search(docs, tenant, unit(1), question, "lexical", 3)
        assert hits and hits[0].document_id == want, (lang, question, [h.document_id for h in hits])
        # only chunks holding a term of the question: all of them in its script
        assert {h.document_id.split("-")[0] for h in hits} == {lang}, (question, [h.document_id for h in hits])
        for mode in ("fused", "graph"):  # a vector that says nothing (all cosines equal): BM25 ranks
            ranked = [h.document_id for h in await search(docs, tenant, SILENT, question, mode, 3)]
            assert ranked[0] == want, (mode, question, ranked)


async def test_a_scoped_search_finds_other_scripts_inside_the_scope(docs: DocBackend) -> None:
    tenant = await corpora(docs)
    scope = Scope(document_ids=["zh-photo", "ja-photo", "de-photo", "ar-photo", "zh-tea"])
    for lang, question, want in QUESTIONS:
        hits = await search(docs, tenant.scoped(scope), unit(1), question, "lexical", 3)
        assert {h.document_id for h in hits} <= set(scope.document_ids or [])
        if want in (scope.document_ids or []):
            assert hits[0].document_id == want, (lang, question, [h.document_id for h in hits])


async def test_a_question_with_nothing_to_search_finds_nothing_lexically(docs: DocBackend) -> None:
    tenant = await corpora(docs)
    for question in NOTHING_TO_SEARCH:
        assert await search(docs, tenant, unit(1), question, "lexical", 5) == []
        assert len(await search(docs, tenant, unit(1), question, "fused", 5)) == 5  # the vector side answers
