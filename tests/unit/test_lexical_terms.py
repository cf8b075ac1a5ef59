"""Lexical terms in any script (algorithms/bm25.terms, text_match.normalize) and the FTS5 query
built from them: words of letters, marks and digits; runs of scripts written without spaces as
character pairs; and, for any text at all, a query that SQLite runs (or no query) and that finds
a chunk holding the text's terms."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from processors.algorithms.bm25 import _ASCII_PART, _PART, MAX_QUERY_TERMS, query_terms, terms
from processors.algorithms.text_match import normalize
from processors.stores.documents_protocol import tenant_token
from processors.stores.sqlite.docs_schema import SCHEMA
from processors.stores.sqlite.passages import fts_query
from schemas.tenant import Tenant


def test_scripts_without_spaces_become_character_pairs() -> None:
    assert terms("谁拍摄了照片？") == ["谁拍", "拍摄", "摄了", "了照", "照片"]
    assert terms("東京タワー") == ["東京", "京タ", "タワ", "ワー"]
    assert terms("iPhone15を買った") == ["iphone15", "を買", "買っ", "った"]
    assert terms("照") == ["照"]
    assert terms("สวัสดี") == ["สวั", "วัส", "สดี"]  # a Thai vowel sign stays with its letter


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_splits_as_the_general_pattern_splits_it(text: str) -> None:
    assert _ASCII_PART.findall(text) == _PART.findall(text)


def test_punctuation_symbols_and_emoji_are_no_terms() -> None:
    for text in ("🔬🧪☢️", "—", "…", "？！", "\u0301", "_"):
        assert terms(text) == [] and normalize(text) == "", text
    assert terms("Ⅻ？") == ["xii"] and terms("Ｆｕｌｌ") == ["full"]  # compatibility forms fold


def test_words_of_other_alphabets_keep_their_letters() -> None:
    assert terms("Das Foto wurde in Köln aufgenommen.") == ["das", "foto", "wurd", "köln", "aufgenommen"]
    assert terms("مَنْ الْتَقَطَ الصُّورَة؟") == terms("من التقط الصورة")  # Arabic's vowel marks are optional
    assert terms("The albums were studies of_snake") == ["album", "studi", "snake"]  # English as before
    assert normalize("Müller’s Häuser—Köln") == "müller s häuser köln"


def test_a_question_searches_its_first_distinct_terms() -> None:
    words = [f"w{i}" for i in range(MAX_QUERY_TERMS + 10)]
    assert query_terms(words + words) == words[:MAX_QUERY_TERMS]
    assert fts_query(Tenant("u", "c"), []) is None


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=40))
def test_any_text_is_a_query_sqlite_runs_and_finds_its_own_chunk(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.executescript(SCHEMA)
    conn.execute(
        "INSERT INTO chunk_fts(rowid, tenant, terms) VALUES (1, ?, ?)",
        (tenant_token(Tenant("u", "c")), " ".join(terms(text))),
    )
    query = fts_query(Tenant("u", "c"), query_terms(terms(text)))
    if query is None:
        assert terms(text) == []
        return
    assert conn.execute("SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH ?", (query,)).fetchall() == [(1,)]
