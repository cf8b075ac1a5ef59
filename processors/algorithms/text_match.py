"""Lexical matching of question text against entity labels (pure functions)."""

from __future__ import annotations

import re
import unicodedata

import regex

# A word is a letter or digit of any script and the letters, marks and digits that follow it;
# everything else (punctuation of any script, symbols, emoji, "_") separates words.
WORD = regex.compile(r"[\p{L}\p{N}][\p{L}\p{M}\p{N}]*")
# Arabic vowel marks and the tatweel: optional in writing, so a question without them finds a
# text with them.
_ARABIC_MARKS = regex.compile(r"[\u0610-\u061a\u0640\u064b-\u065f\u0670\u06d6-\u06ed]")
# English function words and question words only: a content word ("name", "born") is never one,
# whatever a benchmark's question template repeats.
STOPWORDS = frozenset(
    "a an and are as at be by for from has have he her his i in is it its of on or s she that the "
    "their them they this to was were what when where which who whom whose why with "
    "does did do how many much".split()
)


def fold(text: str) -> str:
    """`text` compatibility-normalized (full-width forms, ligatures) and lower-cased, without
    Arabic's optional marks: the form every lexical comparison reads."""
    return _ARABIC_MARKS.sub("", unicodedata.normalize("NFKC", text).lower())


def normalize(text: str) -> str:
    """Lower-case words separated by single spaces (snake_case and punctuation split)."""
    return " ".join(WORD.findall(fold(text)))


_DISAMBIGUATION = re.compile(r"\s*\([^)]*\)\s*$")
MAX_NAME_WORDS = 6  # a name (of a person, a title, a bridge) has at most this many words
_ARTICLE = re.compile(r"^(the|a|an) ")


def title_key(title: str) -> str:
    """The concept a document title names: normalized, without a trailing disambiguation or a
    leading article ("The Beatles (band)" -> "beatles"), as the mentions of its subject read."""
    key = normalize(_DISAMBIGUATION.sub("", title)) or normalize(title)
    return _ARTICLE.sub("", key)


def content_tokens(text: str, max_tokens: int = 32) -> list[str]:
    """Distinct non-stopword tokens of `text`, in order."""
    seen: dict[str, None] = {}
    for tok in normalize(text).split():
        if tok not in STOPWORDS and len(seen) < max_tokens:
            seen.setdefault(tok, None)
    return list(seen)


def label_phrases(text: str, max_words: int = 24, max_tokens: int = 256) -> list[str]:
    """Every normalized run of up to `max_words` consecutive words of `text` that holds a
    non-stopword: the names an entity label must equal to occur in `text` as a whole phrase."""
    words = normalize(text).split()[:max_tokens]
    out: dict[str, None] = {}
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + max_words) + 1):
            run = words[i:j]
            if any(w not in STOPWORDS for w in run):
                out.setdefault(" ".join(run), None)
    return list(out)


def label_match_score(label: str, question: str) -> float:
    """1.0 when the whole label occurs in the question as a phrase; otherwise the share of
    the label's content tokens found in the question, scaled below 1 (0 when none)."""
    lab, q = normalize(label), normalize(question)
    if not lab:
        return 0.0
    ltoks = [t for t in lab.split() if t not in STOPWORDS]
    if not ltoks:
        return 0.0  # a label of stopwords only ("the", "of") names nothing
    if f" {lab} " in f" {q} ":
        return 1.0
    qtoks = set(q.split())
    share = sum(t in qtoks for t in ltoks) / len(ltoks)
    return 0.8 * share
