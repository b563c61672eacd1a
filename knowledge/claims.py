"""Verified claims: every sentence of a generated text (an answer, an enrichment summary) is checked against its
source text.

A model's `[n]` markers are not trusted (small models rarely write them, and sometimes write
wrong ones), and neither is its confidence (they answer unanswerable questions with invented
facts). So after generation:

1. the answer is split into sentences (list items count as sentences);
2. a sentence is *supported* by an excerpt when the excerpt contains most of its content terms
   (the lexical index's own tokenizer: stemmed, accent-folded, identifiers split) or one of the
   excerpt's sentences says nearly the same thing (embedding similarity), **and** every specific
   token it states — numbers, identifiers, settings, options — appears in that excerpt;
3. markers pointing at excerpts that do not support their sentence are dropped; a sentence with
   no marker gets the excerpts that support it (the best two), when any clearly does;
4. sentences with nothing to check (no content terms: "Here is how:", or the question restated)
   are neither supported nor not.

The same module recognises an answer that says the excerpts do not contain the answer, and picks
the language of a plain refusal.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from core import languages
from knowledge.index.lexical import document_vector, query_vector
from knowledge.search.when import MONTHS, PRESENT_RE, TIME_WORDS_RE, TimeRead, read_time

MARKER_RE = re.compile(r"\s*\[(\d+(?:\s*[,;-]\s*\d+)*)\]")
# Sentence ends, line breaks before list items, and blank lines split an answer into claims.
CLAIM_SPLIT_RE = re.compile(r"(?<=[.!?])(?:\s*\[[\d ,;-]+\])*\s+(?=[^\s\[])|\n+")
NUMBER_RE = re.compile(r"(?<![\w.])\d[\d_.,:/]*\d(?![\w])|(?<![\w.])\d(?![\w.])")
SPECIFIC_RE = re.compile(
    r"`([^`]{1,80})`"
    r"|(?<![\w-])(--?[a-z][a-z0-9]*(?:-[a-z0-9]+)*)"
    r"|\b([A-Za-z_][A-Za-z0-9]*(?:_|::|\.)[A-Za-z0-9_]+(?:(?:_|::|\.)[A-Za-z0-9_]+)*)\b"
    r"|\b([A-Z][A-Z0-9_]{3,})\b"
    r"|\b([a-z]+[A-Z][A-Za-z0-9]*)\b"
    r"|(?<![\w~$@%#?])([~$@%#][A-Za-z_][\w-]*)"  # sigils: search terms (~n), variables ($HOME), @decorators
    r"|(?:(?<=\s)|^)(\?[a-z][\w-]*)"  # query terms such as ?name (after a space: not a sentence's end)
)
SPECIFIC_OR_NUMBER_RE = re.compile(SPECIFIC_RE.pattern + "|" + NUMBER_RE.pattern)
RESTATEMENT_SHARE = 0.2  # a sentence whose terms are at least 80% the question's restates it: nothing to check
LEXICAL_SUPPORT = 0.5  # share of a sentence's content terms an excerpt must contain
DENSE_SUPPORT = 0.65  # or: cosine similarity to one of the excerpt's sentences
CITATIONS_PER_CLAIM = 2  # an unmarked sentence supported by several documents cites the best two
SHORT_QUOTE = 20  # a quoted unit shorter than this (a value cut from its lead-in) is shown with the unit before it
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n{2,}")  # an excerpt cut into sentences when no units were given


@dataclass
class Claim:
    text: str
    citations: list[int] = field(default_factory=list)
    supported: bool | None = None  # None: nothing to check
    # Per citation, the excerpt's sentence that supports the claim best, verbatim: {"n": 1, "text": "…"}.
    quotes: list[dict[str, object]] = field(default_factory=list)
    relevant: bool | None = None  # the cross-encoder reads it as an answer to the question (None: not judged)
    # Why an excerpt that shares its words does not support it: "value", "field", "polarity", "time" (it states it
    # of another time: a superseded value offered as a value of now, today's value offered as the 2025 one).
    problem: str = ""
    # The sentence as it was checked, when it is shown in another language (chat/rendering.py): `text` is then its
    # rendering in the asker's language, values, names and markers unchanged.
    original: str = ""

    def as_dict(self) -> dict[str, object]:
        shown: dict[str, object] = {
            "text": self.text, "citations": self.citations, "supported": self.supported, "quotes": self.quotes,
            "relevant": self.relevant, "problem": self.problem,
        }  # fmt: skip
        return {**shown, "original": self.original} if self.original else shown


@dataclass
class EvidenceText:
    """What a claim may be checked against: the excerpt's full chunk and the sentences the model read."""

    text: str
    units: Sequence[str]
    document: str = ""  # which document the excerpt comes from (two excerpts may share one)
    # For a question about time (knowledge/search/when.py): when the excerpt's version was in force (first and
    # last day, None: open), whether it is what its document says now, whether its document has another state
    # (earlier versions, a supersession), how many versions its document has had since (0: its latest), whether
    # it is a first version, and the lines its version replaced.
    window: tuple[dt.date | None, dt.date | None] = (None, None)
    current: bool = True
    has_history: bool = False
    step: int = 0
    first: bool = False
    before: str = ""
    note: str = ""  # the unit that tells what its version changed (chat/history.py), not what the version says


def fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    return re.sub(r"\s+", " ", text.replace("`", "").replace("*", ""))


NUMBER_WORDS = (
    "one two three four five six seven eight nine ten eleven twelve fifteen twenty thirty forty fifty sixty "
    "hundred thousand million once twice "
    "dos tres cuatro cinco seis siete ocho nueve diez once doce quince veinte treinta cuarenta "
    "cincuenta cien ciento mil millón"
).split()
NUMBER_VALUES = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "hundred": 100, "thousand": 1000, "uno": 1, "una": 1, "dos": 2, "tres": 3, "cuatro": 4, "cinco": 5, "seis": 6,
    "siete": 7, "ocho": 8, "nueve": 9, "diez": 10, "doce": 12, "quince": 15, "veinte": 20, "treinta": 30,
    "cuarenta": 40, "cincuenta": 50, "cien": 100, "ciento": 100, "mil": 1000,
}  # fmt: skip
NUMBER_WORD_RE = re.compile(r"\b(" + "|".join(NUMBER_WORDS) + r")\b", re.IGNORECASE)


NAME_RE = re.compile(r"\b[A-ZÁÉÍÓÚÑ][\w-]*[a-z][\w-]*\b")  # Debian, PostgreSQL, Jonathan (not CONSTANTS)
ACRONYM_RE = re.compile(r"\b[A-Z]{2,}\b")  # GLS, DHL, VAT: a name as much as PostNord is
LIST_MARKER_RE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
LITERAL_RE = re.compile(r"\b(?:True|False|None|true|false|null)\b")  # a setting's value, as code writes it

# A capital that opens a sentence (the claim's own first word, or one after a full stop or a code block within it)
# is no sign of a name; in German every noun has one, so there only a capital inside the word is (PostgreSQL).
SENTENCE_START_RE = re.compile(r"(?:^|[.!?]\s+|```\s*)\W*$")
INNER_CAPITAL_RE = re.compile(r"\w[A-Z]|[\d_]")


@functools.lru_cache(maxsize=1024)
def name_words(sentence: str) -> tuple[str, ...]:
    """The words of a sentence that read as names (NAME_RE), without those capitalised because a sentence starts
    there, and in German, without the nouns (a claim is read for them several times: kept)."""
    german = languages.detect(sentence) == "de"
    return tuple(m.group(0) for m in NAME_RE.finditer(sentence)
                 if not SENTENCE_START_RE.search(sentence[: m.start()])
                 and (not german or INNER_CAPITAL_RE.search(m.group(0))))  # fmt: skip


# A fenced code block inside a claim ("… la siguiente línea: ```bash gunicorn -w 4 'hello:app' ``` Esta …"), its
# language tag, and its code (to the end when the draft stopped inside it).
FENCE_RE = re.compile(r"```[A-Za-z0-9_+-]*\s*(?P<code>.*?)(?:```|$)", re.DOTALL)


def unfenced(sentence: str) -> str:
    """The sentence with each fenced code block replaced by its code: what the block states is found in it like any
    other value, and its backticks never pair with an inline span's (which made one value of the prose between)."""
    return FENCE_RE.sub(lambda m: f" {m.group('code').strip()} ", sentence) if "```" in sentence else sentence


def specifics(sentence: str) -> list[str]:
    """Tokens a sentence states that must be found verbatim: numbers (digits or words), identifiers and
    literal values (`false`, `None`)."""
    sentence = unfenced(sentence)
    found = [next(g for g in m.groups() if g) for m in SPECIFIC_RE.finditer(sentence)]
    found += LITERAL_RE.findall(sentence)
    found += [m.group(0).rstrip(".,:") for m in NUMBER_RE.finditer(sentence)]
    found += [m.group(0).lower() for m in NUMBER_WORD_RE.finditer(sentence)]
    return [token for token in dict.fromkeys(found) if token]


NUMBER_IN_TEXT_RE = re.compile(r"(?<![\w.])(\d[\d_,.]*\d|\d)(\s?[km]\b)?(?![\w])", re.IGNORECASE)
NUMBER_WINDOW = 160  # characters either side of a number in which the claim's own terms must appear


def number_value(text: str) -> float | None:
    """The value a numeral writes: "30,000", "30_000", "30k" and "30000" are one number; "4.4" stays 4.4.

    A comma followed by exactly three digits separates thousands; any other comma is a decimal point."""
    match = NUMBER_IN_TEXT_RE.fullmatch(text.strip())
    if not match:
        return None
    digits, suffix = match.group(1).replace("_", ""), (match.group(2) or "").strip().lower()
    digits = re.sub(r",(?=\d{3}(?!\d))", "", digits).replace(",", ".")
    if digits.count(".") > 1:
        return None  # a version or an address ("1.2.3"): compared as text
    try:
        value = float(digits)
    except ValueError:
        return None
    return value * {"k": 1e3, "m": 1e6}.get(suffix, 1)


def _number_positions(body: str, token: str) -> list[int]:
    """Where the body writes the same number as `token` (digits in any grouping, or as a word)."""
    wanted = fold(token)
    if NUMBER_WORD_RE.fullmatch(wanted):
        value: float | None = float(NUMBER_VALUES.get(wanted, -1))
    else:
        value = number_value(wanted)
    positions = []
    if value is None:  # "1.2.3", "10:30": the very characters
        positions = [m.start() for m in re.finditer(rf"(?<![\w.]){re.escape(wanted)}(?![\w])", body)]
    else:
        positions = [m.start() for m in NUMBER_IN_TEXT_RE.finditer(body) if number_value(m.group(0)) == value]
        words = [word for word, v in NUMBER_VALUES.items() if v == value]
        positions += [m.start() for word in words for m in re.finditer(rf"\b{word}\b", body)]
    return positions


def _is_number(token: str) -> bool:
    return bool(NUMBER_RE.fullmatch(token) or NUMBER_WORD_RE.fullmatch(token))


STRUCTURED_NAME_RE = re.compile(r"[A-Za-z_][\w.:]*(?:_|\.|::)[\w.:]*|[a-z]+[A-Z]\w*")


def _contains(body: str, token: str) -> bool:
    if _is_number(token):
        # "two" and "2", "30k" and "30,000" are the same number; and a word, not a part of one ("one" in "someone").
        return bool(_number_positions(body, token))
    wanted = fold(token)
    if wanted in body or wanted.replace(" ", "") in body.replace(" ", ""):
        return True
    if "=" in wanted:  # `part_isolating=False` and "part_isolating = False" / "set part_isolating to False"
        return all(_contains(body, side.strip()) for side in wanted.split("=") if side.strip())
    bare = wanted.removesuffix("()")
    # `get_app_dir()` for a documented get_app_dir; a plain word (`now()`) still needs its parentheses.
    return bare != wanted and bool(STRUCTURED_NAME_RE.fullmatch(token.removesuffix("()"))) and bare in body


def _states_specifics(sentence: str, evidence: EvidenceText, given: set[str], *, timed: bool = False) -> bool:
    """Every specific the sentence adds (not already named by the question) is in the excerpt.

    A number must stand near terms of the claim (two for a one-digit number, one otherwise), within a
    window of characters rather than a line, so that a value wrapped onto its own line still has its
    sentence: a bare "1" somewhere in a long chunk does not support "he got 1 vote". Only the sentences the
    model read count (the whole chunk when none are given): a value elsewhere in the chunk is not the one the
    claim's sentence states. A value (a number or a literal such as `false`) of a claim that names a setting
    must belong to that setting: the nearest setting name before it in the excerpt is the claim's, or none
    ("Request-Strictness is false" is not supported by "Always-Prompt … Default: false"). `timed`: the claim
    answers a question about time, whose words ("originally", "before the last change") are for the time check,
    not terms a value must stand near."""
    body = fold(" ".join(evidence.units) if evidence.units else evidence.text)
    context = set(query_vector(SPECIFIC_OR_NUMBER_RE.sub(" ", TIME_WORDS_RE.sub(" ", sentence) if timed
                                                         else sentence))[0])  # fmt: skip
    owners = _setting_names(sentence)
    for token in specifics(sentence):
        if fold(token) in given:
            continue
        if LITERAL_RE.fullmatch(token):
            positions = [m.start() for m in re.finditer(rf"\b{fold(token)}\b", body)]
            if not positions or not _bound(body, positions, owners):
                return False
            continue
        if not _is_number(token):
            if not _contains(body, token):
                return False
            continue
        positions = _number_positions(body, token)
        if not positions:
            return False
        if context:
            shared = min(len(context), 2 if len(token) == 1 else 1)
            windows = (body[max(0, at - NUMBER_WINDOW) : at + NUMBER_WINDOW] for at in positions)
            near = [len(context & set(query_vector(w)[0])) >= shared for w in windows]
            positions = [at for at, ok in zip(positions, near, strict=True) if ok]
            if not positions:
                return False
        if not _bound(body, positions, owners):
            return False
    return True


SETTING_NAME_RE = re.compile(r"\b[a-z][a-z0-9]*(?:(?:::|_)[a-z0-9-]+)+\b")  # folded: max_cookie_size, a::b::c-d
OWNER_WINDOW = 300  # characters before a value searched for the setting it belongs to


def _setting_names(sentence: str) -> set[str]:
    return {m.group(0) for m in SETTING_NAME_RE.finditer(fold(sentence))}


def _bound(body: str, positions: list[int], owners: set[str]) -> bool:
    """One of the value's positions has, as the nearest setting name before it, one the claim names (or none)."""
    if not owners:
        return True
    for at in positions:
        before = list(SETTING_NAME_RE.finditer(body[max(0, at - OWNER_WINDOW) : at]))
        if not before or before[-1].group(0) in owners:
            return True
    return False


STRONG_IDENTIFIER_RE = re.compile(r"[_:.\-/]|\d")  # names with structure: snake_case, a.b, A::B, --opt, RS256


def named_identifiers(question: str) -> list[str]:
    """Identifiers a question names that its answer must be about: settings, options, qualified names, codes.

    Plain capitalised words (JSON, GLPK, MIME) and bare numbers are not counted: documents spell them
    in many ways, or use them for other things."""
    found = [next(g for g in m.groups() if g) for m in SPECIFIC_RE.finditer(question)]
    return [t for t in dict.fromkeys(found) if STRONG_IDENTIFIER_RE.search(t.strip("-")) and len(t) >= 3]


def missing_identifiers(question: str, texts: Sequence[str]) -> list[str]:
    """The question's named identifiers that none of the texts contains (a qualified name `a.b.c`
    also counts as present when its own name `c` appears: code and docs often refer to members unqualified)."""
    body = fold(" ".join(texts))
    missing = []
    for token in named_identifiers(question):
        last = re.split(r"::|\.", token.strip("`()"))[-1]
        if not _contains(body, token) and not (last != token and len(last) >= 3 and _contains(body, last)):
            missing.append(token)
    return missing


META_CITATION_RE = re.compile(
    r"^(?:(?:this|that|it|these|which)\s+(?:is|are|was|can be)\s+)?(?:as\s+)?(?:stated|mentioned|described|shown|"
    r"explained|found|seen|noted|documented)\s+(?:in|by|on)\b[\s,and&y.]*$"
    r"|^(?:see|source|sources|cf)\b[\s:,and&y.]*$"
    r"|^(?:esto|como)\s+(?:se\s+)?(?:indica|menciona|describe|explica)n?\s+(?:en)?[\s,y.]*$",
    re.IGNORECASE,
)


def split_claims(answer: str) -> list[tuple[str, list[int]]]:
    """(sentence without markers, the [n] numbers it carried) for each sentence of the answer."""
    claims: list[tuple[str, list[int]]] = []
    for piece in CLAIM_SPLIT_RE.split(answer):
        if not piece or not piece.strip():
            continue
        numbers: list[int] = []
        for match in MARKER_RE.finditer(piece):
            for part in re.split(r"\s*[,;]\s*", match.group(1)):
                if "-" in part:
                    low, _, high = part.partition("-")
                    if low.strip().isdigit() and high.strip().isdigit() and int(high) - int(low) < 10:
                        numbers += list(range(int(low), int(high) + 1))
                elif part.strip().isdigit():
                    numbers.append(int(part))
        text = MARKER_RE.sub("", piece).strip()
        text = re.sub(r"\s+([.,;:!?])(?=\s|$)", r"\1", text)  # "word ." → "word."; not "búsqueda ?name"
        if claims and numbers and META_CITATION_RE.match(text):
            # "This is stated in [1] and [2]." says where the previous sentence comes from: not a claim.
            claims[-1] = (claims[-1][0], list(dict.fromkeys(claims[-1][1] + numbers)))
        elif text:
            claims.append((text, list(dict.fromkeys(numbers))))
    return claims


# Negation cues: a claim and the excerpt sentence it stands on must agree on them ("will lock out" is not
# supported by "does not throttle"). Code spans are left out first (`not x` is code, not a denial).
NEGATION_RE = re.compile(
    r"\b(?:not|no|never|nothing|neither|nor|cannot|unable|nunca|ningun[oa]?|ningún|nada|tampoco|ni)\b|n't\b",
    re.IGNORECASE,
)
CODE_SPAN_RE = re.compile(r"`[^`]*`")
VERDICT_RE = re.compile(r"^\s*(?:yes|no|sí|si)\b", re.IGNORECASE)  # a yes/no answer: always a claim to check


CLAUSE_RE = re.compile(r"[;:,]\s+|\s+(?:but|however|whereas|pero|sino|aunque)\s+", re.IGNORECASE)


def negated(sentence: str) -> bool:
    return bool(NEGATION_RE.search(CODE_SPAN_RE.sub(" ", sentence)))


def agrees(claim: str, quote: str) -> bool:
    """The claim and its excerpt sentence say the same thing is or is not so: the whole sentence agrees on
    negation, or one of its clauses does and carries most of the claim's terms ("returns are accepted within
    thirty days" stands on "may return within thirty days; after that, returns are not accepted")."""
    if negated(claim) == negated(quote):
        return True
    terms = set(query_vector(claim)[0])
    for clause in CLAUSE_RE.split(quote):
        shared = terms & set(query_vector(clause)[0])
        if negated(clause) == negated(claim) and len(shared) >= max(1, len(terms) // 2):
            return True
    return False


# --- values in their field: table rows, spreadsheet records, `key: value` lines -----------------
TABLE_ROW_RE = re.compile(r"^\s*\|.*\|\s*$")  # | a | b |
TABLE_RULE_RE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")  # |---|:---:|
SHEET_ROW_RE = re.compile(r"^Row (\d+): ")  # a spreadsheet row as the extractor writes it (knowledge/ingest/office.py)
FIELD_RE = re.compile(r"^([^\W\d][\w ()/.%#-]{0,40}?):\s+(\S.*)$")  # a `key: value` pair, the key a short label
RECORD_LINE_RE = re.compile(  # a line that is one record: a Markdown table row, or two `key: value` pairs or more
    r"^\s*\|.*\|\s*$|^\s*(?:[-*•]\s+)?(?:Row \d+: )?[^:;\n|]{1,60}: [^;\n]*(?:; [^:;\n|]{1,60}: [^;\n]*)+\s*$"
)
ROW_NAMED_RE = re.compile(r"\b(?:row|fila|line|línea|linea)\s+(?:no\.?\s*|number\s+|n\.?º\s*)?(\d+)\b", re.IGNORECASE)


@dataclass
class Record:
    """One row of a table or one `key: value` line: each value under the field (column, key) it belongs to."""

    line: str  # folded, as it stands in the text
    fields: dict[str, str]  # field name as written → its value (folded)
    row: str = ""  # the row number a spreadsheet shows, when the line says it


def _field_pairs(text: str) -> dict[str, str]:
    pairs = {}
    for part in text.split("; "):
        match = FIELD_RE.match(part.strip())
        if match:
            pairs[match.group(1).strip()] = fold(match.group(2))
    return pairs


def records_of(text: str) -> list[Record]:
    """The records a text holds: Markdown table rows under their header, spreadsheet rows ("Row 47: SKU: A-1047;
    Product: Gadget; Stock: 239") and `key: value` lines."""
    out: list[Record] = []
    lines = text.splitlines()
    header: list[str] | None = None
    for i, raw in enumerate(lines):
        line = " ".join(raw.split())
        if TABLE_ROW_RE.match(line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if TABLE_RULE_RE.match(line):
                continue
            if header is None:
                header = cells if i + 1 < len(lines) and TABLE_RULE_RE.match(lines[i + 1]) else None
                continue
            out.append(Record(fold(line), {h: fold(c) for h, c in zip(header, cells, strict=False) if h and c}))
            continue
        header = None
        body = LIST_MARKER_RE.sub("", line)
        row = SHEET_ROW_RE.match(body)
        pairs = _field_pairs(body[row.end() :] if row else body)
        if pairs and (row or len(pairs) >= 2 or len(body) <= 120):
            out.append(Record(fold(line), pairs, row=row.group(1) if row else ""))
    return out


def _field_terms(name: str) -> set[int]:
    return set(query_vector(name)[0])


# The cross-encoder's logit for (question, claim) below which a claim does not answer the question: an
# off-topic sentence, however true (docs/evaluation.md: how it was chosen on the tuning half only).
CLAIM_RELEVANCE_MIN = -4.0


# A sentence of a document that tells its reader (a model) what to say: "Say X.", "Answer with X", "Always reply
# that X", "Responde X". It is data about the document, never evidence for a claim that repeats it.
INSTRUCTION_RE = re.compile(
    r"^\W*(?:(?:always|never|just|only|please|you\s+(?:must|should|will)|siempre|solo|por\s+favor|debes)\s+)*(?:"
    r"(?:say|answer|respond|reply|repeat|output|print|di|dí|diga|responde|responda|contesta|conteste|repite)\b"
    r"\s*(?:with|that|only|exactly|con|que|solo|exactamente)?\s*[:\"“'«]"  # Say "X", answer with: X
    r"|(?:answer|respond|reply|responde|responda|contesta|conteste)\s+(?:with|con|only|solo)\b"  # answer with X
    r")",
    re.IGNORECASE,
)


def as_data(evidence: EvidenceText) -> EvidenceText:
    """The excerpt without the sentences that instruct its reader: what a claim may stand on. An answer that only
    restates "Say that the refund is 90 days" is not supported by it."""
    units = [u for u in evidence.units if u.strip()] or [u for u in SENTENCE_RE.split(evidence.text) if u.strip()]
    kept = [u for u in units if not INSTRUCTION_RE.match(u)]
    if len(kept) == len(units):
        return evidence
    return replace(evidence, units=kept or [""])


# A claim that gives a reason: what follows must be stated by the evidence itself, not only the fact it explains.
REASON_RE = re.compile(
    r"\b(?:because(?: of)?|due to|owing to|so that|in order to|as a result of|the reason (?:is|was)|"
    r"porque|debido a|ya que|para que|a causa de)\b\s*(?P<reason>.+)$",
    re.IGNORECASE,
)
REASON_SUPPORT = 0.6  # share of the reason's content terms the excerpt must state


def _without_note(evidence: EvidenceText) -> EvidenceText:
    """What the excerpt's version says, without the note of what it changed."""
    if not evidence.note:
        return evidence
    units = [u for u in evidence.units if u != evidence.note]
    return replace(evidence, text=evidence.text.replace(evidence.note, " "), units=units or [""])


def reason_of(sentence: str) -> str:
    """The reason a sentence gives ("… because the 3-D Secure step takes 45 s" → "the 3-D Secure step takes 45 s")."""
    match = REASON_RE.search(sentence)
    return match.group("reason").strip() if match else ""


class Verifier:
    def __init__(self, evidence: Sequence[EvidenceText], *, question: str = "",
                 embed: Callable[[list[str]], np.ndarray] | None = None,
                 cross: Callable[[str, list[str]], np.ndarray] | None = None,
                 when: TimeRead | None = None, now: dt.datetime | None = None,
                 dense_support: float = DENSE_SUPPORT) -> None:  # fmt: skip
        self.evidence = [as_data(e) for e in evidence]  # instructions in a document are data, never support
        self.dense_support = dense_support  # the cosine `embed` must reach (its scale is the encoder's own)
        self.multilingual = dense_support != DENSE_SUPPORT  # `embed` is the multilingual encoder: claims may cross
        self.question = question
        self.when = when  # the question asks about the past: each claim must rest on evidence of its time
        self.now = now or dt.datetime.now(dt.UTC)
        self.given = {fold(token) for token in specifics(question)}  # what the question named is not a claim
        for e in self.evidence:  # nor is the name of a document the claim rests on ("… in expenses.md")
            key = e.document.rsplit(":", 1)[-1] if e.document else ""
            self.given |= {fold(key), fold(key.rsplit("/", 1)[-1])} - {""}
        self.question_terms = set(query_vector(question)[0])
        self.embed = embed
        self.cross = cross
        self.field_problems: set[str] = set()  # claims whose value sits in a record under another field or row
        self._checked: dict[tuple[str, tuple[int, ...], bool], Claim] = {}
        self._relevance: dict[str, bool] = {}
        # The sentences the model read (the whole chunk when none were given) are what a claim may stand on.
        self._terms = [set(document_vector(" ".join(e.units) if e.units else e.text)[0]) for e in self.evidence]
        self._bodies = [fold(" ".join(e.units) if e.units else e.text) for e in self.evidence]
        self.question_folded = fold(question)
        self._unit_vectors: list[np.ndarray | None] = [None] * len(self.evidence)
        # The records among the sentences the model read (a table row's header comes from the whole chunk).
        self._records = [[r for r in records_of(e.text) if r.line in self._bodies[n]]
                         for n, e in enumerate(self.evidence)]  # fmt: skip
        self._plain = [self._outside_records(n) for n in range(len(self.evidence))]

    def _dense(self, sentence_vector: np.ndarray, n: int) -> float:
        if self.embed is None or not self.evidence[n].units:
            return 0.0
        if self._unit_vectors[n] is None:
            self._unit_vectors[n] = self.embed(list(self.evidence[n].units))
        return float(np.max(self._unit_vectors[n] @ sentence_vector))

    def _states_specifics(self, sentence: str, sentence_vector: np.ndarray | None, n: int) -> bool:
        """Every specific the sentence adds is in excerpt n (`_states_specifics`). Across languages a number cannot
        stand near the claim's words (they are in another language): it must be in one of the excerpt's sentences
        that the multilingual encoder puts as close to the claim as support asks."""
        evidence = self.evidence[n]
        if not self.multilingual or sentence_vector is None or self.embed is None or not evidence.units:
            return _states_specifics(sentence, evidence, self.given, timed=self.when is not None)
        self._dense(sentence_vector, n)
        vectors = self._unit_vectors[n]
        assert vectors is not None
        close = [fold(unit) for unit, v in zip(evidence.units, vectors, strict=True)
                 if float(v @ sentence_vector) >= self.dense_support]  # fmt: skip
        for token in specifics(sentence):
            if fold(token) in self.given:
                continue
            if _is_number(token) and not any(_number_positions(unit, token) for unit in close):
                return False
            if not _is_number(token) and not _contains(self._bodies[n], token):
                return False
        return True

    def support(self, sentence: str, sentence_vector: np.ndarray | None, *, values: bool = True,
                timed: bool = True) -> list[float]:  # fmt: skip
        """Per excerpt, how well it supports the sentence (0 when it lacks a specific or a name the sentence
        states, or speaks of another time than the claim; `values=False`: the words alone, to tell a wrong value
        from an unrelated sentence; `timed=False`: whatever the time, to tell a stale value from a wrong one)."""
        terms = set(query_vector(sentence)[0])
        anchors = self._anchors(sentence)
        names = self._added_names(sentence)
        reason = set(query_vector(reason_of(sentence))[0]) - self.question_terms if values else set()
        time = self.time_of(sentence) if values and timed else None
        scores = []
        for n, evidence in enumerate(self.evidence):
            if values and (
                not self._states_specifics(sentence, sentence_vector, n)
                or (time is not None and not self.of_its_time(sentence, time, evidence))
                or not anchors <= self._terms[n]
                or not all(_contains(self._bodies[n], name) for name in names)
                or not self.in_their_fields(sentence, n)
                or (reason and len(reason & self._terms[n]) < REASON_SUPPORT * len(reason))  # a reason not stated
            ):
                scores.append(0.0)
                continue
            lexical = len(terms & self._terms[n]) / len(terms) if terms else 0.0
            dense = self._dense(sentence_vector, n) if sentence_vector is not None else 0.0
            scores.append(max(lexical / LEXICAL_SUPPORT, dense / self.dense_support))
        return scores  # >= 1.0 means supported

    def time_of(self, sentence: str) -> TimeRead | str | None:
        """The time a claim is about, when the question asks about the past: the past period it names itself, else
        "now" when it says now, else the question's period, else "earlier" when the question asks for an earlier
        state ("before the last change"); None: any time (a question about now, or only why or when)."""
        if self.when is None:
            return None
        own = read_time(sentence, now=self.now)
        if own is not None and own.at is not None:
            return own
        if PRESENT_RE.search(sentence):
            return "now"
        if self.when.at is not None:
            return self.when
        return "earlier" if self.when.earlier else None

    def of_its_time(self, sentence: str, time: TimeRead | str, evidence: EvidenceText) -> bool:
        """Whether the excerpt speaks of the claim's time: for a past period, its version was in force then, or
        it was made after and the values the claim states are among the lines it replaced; for "now", it is in
        force now; for "earlier", see `_earlier`."""
        if time == "now":
            return evidence.current
        if time == "earlier":
            return self._earlier(sentence, evidence)
        assert isinstance(time, TimeRead) and time.at is not None
        start, end = evidence.window
        if time.covers(start, end):
            return True
        return start is not None and start > time.at.date() and self._replaced(sentence, evidence)

    def _replaced(self, sentence: str, evidence: EvidenceText) -> bool:
        """The values the claim states (one at least) are among the lines the excerpt's version replaced."""
        return bool(evidence.before) and self._states_values(sentence, EvidenceText(evidence.before, [evidence.before]))

    def _states_values(self, sentence: str, evidence: EvidenceText) -> bool:
        """The excerpt states the values the claim adds to the question (numbers, identifiers, names), and the claim
        adds one at least: a claim with no value of its own is stated by nothing in particular."""
        names = self._added_names(sentence)
        if not names and not [t for t in specifics(sentence) if fold(t) not in self.given]:
            return False
        body = fold(" ".join(evidence.units) if evidence.units else evidence.text)
        return _states_specifics(sentence, evidence, self.given, timed=True) and all(_contains(body, n) for n in names)

    def _earlier(self, sentence: str, evidence: EvidenceText) -> bool:
        """For a question about an earlier state ("before the last change", "previously", "originally"): a
        document with no other state is its own history. Otherwise a value its current version still states is
        no earlier value (unless the question asks what was there originally); and the claim rests on the lines
        replaced by the latest change that touched what it speaks of, or on the state right before the current
        one (the previous version, a superseded document). For "originally": on the first version, or on the
        lines replaced by the first change that touched it. An older version's value is not "the one before the
        last change", nor the previous version's "the original one"."""
        assert self.when is not None
        if not evidence.has_history:
            return True
        same = [e for e in self.evidence if e is evidence or (evidence.document and e.document == evidence.document)]
        if not self.when.original and any(e.current and self._states_values(sentence, _without_note(e)) for e in same):
            return False
        touched = [e for e in same if e.before and self._touches(sentence, e.before)]
        # The change whose replaced lines hold the earlier value: the latest that touched it, or for "originally"
        # the first (what it replaced was there from the start, as far as the excerpts read go).
        chosen = (max if self.when.original else min)(touched, key=lambda e: e.step) if touched else None
        if chosen is evidence and self._replaced(sentence, evidence):
            return True
        if self.when.original:  # the first state: the first version, or what the first change replaced (above)
            return evidence.first and not evidence.current
        return not evidence.current and evidence.step <= 1

    def _touches(self, sentence: str, lines: str) -> bool:
        """Whether replaced lines speak of what the claim speaks of: a setting it names, else a term of its own."""
        owners = _setting_names(sentence)
        if owners:
            return any(owner in fold(lines) for owner in owners)
        terms = set(query_vector(SPECIFIC_OR_NUMBER_RE.sub(" ", TIME_WORDS_RE.sub(" ", sentence)))[0])
        return bool(terms & set(document_vector(lines)[0]))

    def _outside_records(self, n: int) -> str:
        body = self._bodies[n]
        for record in self._records[n]:
            body = body.replace(record.line, " ")
        return body

    def in_their_fields(self, sentence: str, n: int) -> bool:
        """Each value the claim states that sits in a record of excerpt n sits there under a field the claim or the
        question names (a column, a key), in a row they mean (its row number, or a value of the question's in the
        row): "the product in row 47 is 239" is not supported by "Row 47: …; Product: Gadget; Stock: 239". Claims
        that name no field of the excerpt's records, and values also stated outside them, are left to the other
        checks."""
        records = self._records[n]
        if not records:
            return True
        named_terms = set(query_vector(sentence)[0]) | self.question_terms
        named = {f for r in records for f in r.fields if _field_terms(f) and _field_terms(f) <= named_terms}
        if not named:
            return True
        meant = self._rows_meant(sentence, records)
        values = [t for t in specifics(sentence) if fold(t) not in self.given] + self._added_names(sentence)
        for value in values:
            holders = [(r, f) for r in records for f, cell in r.fields.items() if _contains(cell, value)]
            if not holders or _contains(self._plain[n], value):
                continue
            if not any(f in named and (meant is None or r in meant) for r, f in holders):
                self.field_problems.add(sentence)
                return False
        if meant is not None and self._words_of_other_rows(sentence, named, meant, records):
            self.field_problems.add(sentence)
            return False
        return True

    def _words_of_other_rows(self, sentence: str, named: set[str], meant: list[Record], records: list[Record]) -> bool:
        """The claim states, for a field it names, words another row holds there and the meant row does not ("the
        product in row 47 is Slate rack" when row 47 holds Slate clock and row 48 Slate rack)."""
        field_words = {t for f in named for t in _field_terms(f)}
        stated = set(query_vector(sentence)[0]) - self.question_terms - field_words
        for name in named:
            own = {t for r in meant for t in query_vector(r.fields.get(name, ""))[0]}
            others = {t for r in records if r not in meant for t in query_vector(r.fields.get(name, ""))[0]}
            if (stated & others) - own:
                return True
        return False

    def _rows_meant(self, sentence: str, records: list[Record]) -> list[Record] | None:
        """The rows the claim or the question points at: by row number, else by a value of the question's that a row
        holds (a SKU, a name); None: no row in particular."""
        numbers = {m.group(1) for m in ROW_NAMED_RE.finditer(f"{sentence} {self.question}")}
        if numbers:
            return [r for r in records if r.row in numbers]
        keys = [t for t in specifics(self.question) if not _is_number(t)] + NAME_RE.findall(self.question)
        rows = [r for r in records if any(_contains(cell, key) for key in keys for cell in r.fields.values())]
        return rows or None

    def _added_names(self, sentence: str) -> list[str]:
        """The names a claim states that the question did not: capitalised words past the first (Eimskip,
        PostNord) and acronyms (GLS). Like a number, each must be in the excerpt the claim stands on: "the
        courier is GLS [2]" is not supported by an excerpt that never names GLS, however many words it shares."""
        sentence = LIST_MARKER_RE.sub("", sentence)
        words = [w for w in [*name_words(sentence), *ACRONYM_RE.findall(sentence)] if w.lower() not in MONTHS]
        return [w for w in dict.fromkeys(words) if fold(w) not in self.question_folded and not CODE_SPAN_RE.search(w)]

    def _anchors(self, sentence: str) -> set[int]:
        """The names (capitalised words past the first) the claim repeats from the question: what the question
        is about ("… opens a connection to a PostgreSQL database") must be in the excerpt that supports it."""
        words = [word for word in name_words(sentence) if word.lower() not in MONTHS]  # a month is a time
        names = {term for word in words for term in query_vector(word)[0]}
        return names & self.question_terms

    def addresses_question(self, claim: Claim, first: bool) -> bool:
        """The cross-encoder reads the claim as an answer to the question; without it, the answer's first
        sentence, or one that shares a content term with the question (not an echo of unrelated excerpt text)."""
        if claim.relevant is not None:
            return claim.relevant
        return first or bool(set(query_vector(claim.text)[0]) & self.question_terms)

    def _checkable(self, sentence: str, alone: bool = False) -> bool:
        """A sentence with content of its own: two terms or more (one, when it names a specific or is the whole
        answer), not all of them the question's own words. One new name is content: "the courier that delivers
        orders to Iceland is the Eimskip courier" answers the question it repeats."""
        terms = set(query_vector(sentence)[0])
        if VERDICT_RE.match(sentence) and terms:
            return True  # "Yes, it will …" restates the question, but its verdict is a claim
        if len(terms) < 2 and not (terms and (alone or specifics(sentence))):
            return False
        new = terms - self.question_terms
        return bool(specifics(sentence) or self._added_names(sentence)) or len(new) > RESTATEMENT_SHARE * len(terms)

    def _best_supporting(self, scores: list[float]) -> list[int]:
        """The excerpts that support a sentence best (ties: the higher-ranked excerpt), one per document:
        a second excerpt of the same document adds no provenance, one from another document does."""
        kept: list[int] = []
        documents: set[str] = set()
        for k in sorted(range(len(scores)), key=lambda k: (-scores[k], k)):
            document = self.evidence[k].document or f"#{k}"
            if scores[k] < 1.0 or len(kept) == CITATIONS_PER_CLAIM:
                break
            if document not in documents:
                kept.append(k + 1)
                documents.add(document)
        return kept

    def check(self, answer: str) -> list[Claim]:
        """Every sentence of the answer, checked (a sentence checked before, as it streamed, is not checked again)."""
        parts = split_claims(answer)
        claims = [self.check_claim(text, numbers, alone=len(parts) == 1) for text, numbers in parts]
        self.judge(claims)
        return claims

    def check_claim(self, text: str, numbers: Sequence[int] = (), *, alone: bool = False) -> Claim:
        """One sentence of the answer (its markers given apart), checked against the excerpts; the cross-encoder's
        relevance is judged apart (`judge`). A copy of the result is kept: a sentence is checked once."""
        key = (text, tuple(numbers), alone)
        if key not in self._checked:
            self._checked[key] = self._check_claim(text, list(numbers), alone)
        return replace(self._checked[key])

    def _check_claim(self, text: str, numbers: list[int], alone: bool) -> Claim:
        if not self._checkable(text, alone=alone) or NOT_FOUND_RE.search(text):  # about the excerpts: not a claim
            return Claim(text=text)
        vector = self.embed([text])[0] if self.embed else None
        scores = self.support(text, vector)
        kept = [n for n in numbers if 1 <= n <= len(scores) and scores[n - 1] >= 1.0]
        if not kept:
            kept = self._best_supporting(scores)
        quotes: list[dict[str, object]] = [{"n": n, "text": self.quote(text, vector, n - 1)} for n in kept]
        agreeing = [q for q in quotes if agrees(text, str(q["text"]))]
        problem = "polarity" if len(agreeing) < len(quotes) and not agreeing else ""
        if not quotes and text in self.field_problems:
            problem = "field"  # its value is in a table row, under another column or in another row
        elif not quotes and self.when is not None and max(self.support(text, vector, timed=False), default=0.0) >= 1:
            problem = "time"  # an excerpt states it, but of another time than the claim is about
        elif not quotes and max(self.support(text, vector, values=False), default=0.0) >= 1.0:
            problem = "value"  # its words are in an excerpt, a number or name it states is not
        kept = [int(q["n"]) for q in agreeing]  # type: ignore[call-overload]
        return Claim(text=text, citations=kept, supported=bool(kept), quotes=agreeing, problem=problem)

    def judge(self, claims: Sequence[Claim]) -> None:
        """With the cross-encoder: does each checked claim answer the question? One batch; each claim text once."""
        judged = [c for c in claims if c.supported is not None]
        if self.cross is None or not self.question or not judged:
            return
        new = list(dict.fromkeys(c.text for c in judged if c.text not in self._relevance))
        if new:
            logits = self.cross(self.question, new)
            self._relevance.update({t: bool(v >= CLAIM_RELEVANCE_MIN) for t, v in zip(new, logits, strict=True)})
        for claim in judged:
            claim.relevant = self._relevance[claim.text]

    def quote(self, sentence: str, sentence_vector: np.ndarray | None, n: int) -> str:
        """The sentence of excerpt n (among those the model read) that the claim stands on, verbatim: what a
        reader checks the claim against. The one stating most of the values the claim adds (numbers, names not
        in the question), then the closest by embedding similarity when there is one, else by shared terms."""
        evidence = self.evidence[n]
        units = [u for u in evidence.units if u.strip()] or [u for u in SENTENCE_RE.split(evidence.text) if u.strip()]
        if not units:
            return ""
        values = [t for t in specifics(sentence) if fold(t) not in self.given]
        stated = np.array([sum(_contains(fold(u), t) for t in values) for u in units], dtype=float)
        terms = set(query_vector(sentence)[0])
        closeness = np.array([len(terms & set(query_vector(u)[0])) / (len(terms) or 1) for u in units])
        if sentence_vector is not None and self.embed is not None and list(units) == list(evidence.units):
            self._dense(sentence_vector, n)  # computes this excerpt's sentence vectors once
            vectors = self._unit_vectors[n]
            if vectors is not None and len(vectors) == len(units):
                closeness = vectors @ sentence_vector
        best = int(np.argmax(stated * 10 + closeness))
        if len(units[best]) < SHORT_QUOTE and best > 0:  # "1000." cut from "Default: 1000.": give it its lead-in
            return " ".join(f"{units[best - 1]} {units[best]}".split())
        return " ".join(units[best].split())


def render(claims: Sequence[Claim], *, evidence: bool = False) -> str:
    """The answer text again, each sentence followed by its verified markers.

    With `evidence`, the sentences no excerpt supports are left out (they stay in `claims`, marked) and under
    each claim, on its own line, stands the excerpt sentence it rests on, verbatim: `> [n] “…”` (each excerpt
    sentence once), so a reader of the plain text can check every claim at a glance."""
    out = []
    shown: set[str] = set()
    kept = [c for c in claims if c.supported is not False] if evidence else list(claims)
    for claim in kept:
        markers = "".join(f"[{n}]" for n in claim.citations)
        text = claim.text
        if markers and text[-1:] in ".!?:;":
            text = f"{text[:-1]} {markers}{text[-1]}"
        elif markers:
            text = f"{text} {markers}"
        out.append(text)
        for quote in claim.quotes if evidence else []:
            if quote["text"] and quote["text"] not in shown:
                shown.add(str(quote["text"]))
                out.append(f"> [{quote['n']}] “{quote['text']}”")
    lists = any(c.text.lstrip().startswith(("-", "*", "•")) for c in kept)
    return "\n".join(out) if lists or shown else " ".join(out)


# --- "the excerpts do not say" -----------------------------------------------------------
_SOURCES = r"(excerpts?|documents?|documentation|docs|context|sources?|passages?|text|information provided)"
_FUENTES = r"(fragmentos?|extractos?|documentos?|documentaci[oó]n|contexto|fuentes?|textos?)"
NOT_FOUND_RE = re.compile(
    "|".join(
        [
            _SOURCES + r"[^.\n]{0,60}?\b(do|does|did)\s*(not|n't)\s+(contain|include|mention|say|provide|cover|specify|"
            r"describe|state|answer|explain|address|have)\b",
            r"\bnot\s+(mentioned|covered|found|provided|specified|included|stated|described|available|present)\s+"
            r"(in|within)\s+the\s+((provided|given|available|retrieved)\s+)?" + _SOURCES,
            r"\b(no|not\s+any)\s+(information|mention|details)\s+(about|on|regarding|in)\b",
            r"\b(cannot|can't|could\s+not|couldn't|unable\s+to)\s+(find|answer|determine|locate)\b",
            r"\bthere\s+is\s+no\s+(information|mention)\b",
            _FUENTES + r"[^.\n]{0,60}?\bno\s+(se\s+)?(contiene|incluye|menciona|dice|proporciona|especifica|describe|"
            r"responde|explica|habla|trata|aparece)n?\b",
            r"\bno\s+(se\s+)?(menciona|encuentra|especifica|proporciona|indica)n?\s+(en|dentro)\b",
            r"\bno\s+(hay|tengo|existe)\s+(ninguna\s+)?(informaci[oó]n|datos|menci[oó]n|detalles)\b",
            r"\bno\s+se\s+(proporciona|menciona|especifica|indica|da|ofrece|incluye|encuentra)n?\s+(ninguna\s+)?"
            r"(informaci[oó]n|datos|detalles|menci[oó]n)\b",
            r"\bno\s+(information|details|data|mention)\s+(is|are|was|were)\s+(provided|given|available|included|"
            r"found|made)\b",
            r"\bno\s+(puedo|es\s+posible)\s+(responder|encontrar|determinar)\b",
        ]
    ),
    re.IGNORECASE,
)


def says_not_found(answer: str) -> bool:
    """The model states the excerpts lack the answer (in its first sentences, or as the whole answer)."""
    head = " ".join(text for text, _ in split_claims(answer)[:2])
    return not answer.strip() or bool(NOT_FOUND_RE.search(head))


# --- model-written text checked against its document ---------------------------------------
PASSAGE_CHARS = 1200  # the document is cut into passages of about this size, at blank lines, to check against
PROBLEM_REASONS = {  # why a model-written sentence is not supported by its source text (excerpts, a document)
    "value": "a number or name it states is not in the source text",
    "field": "its value belongs to another column or row of a table",
    "polarity": "the source text says the opposite",
    "time": "the source text says it of another time (a superseded value, or today's offered as an earlier one)",
    "": "nothing in the source text says it",
}


def passages(text: str, size: int = PASSAGE_CHARS) -> list[EvidenceText]:
    """The text as evidence: paragraphs joined up to `size` characters, each cut into its sentences."""
    out, current = [], ""
    for paragraph in re.split(r"\n\s*\n", text):
        if current and len(current) + len(paragraph) > size:
            out.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current.strip():
        out.append(current)
    return [EvidenceText(p, [" ".join(u.split()) for u in SENTENCE_RE.split(p) if u.strip()]) for p in out]


def unsupported(sentences: Sequence[str], text: str,
                embed: Callable[[list[str]], np.ndarray] | None = None) -> dict[str, str]:  # fmt: skip
    """Of model-written sentences about a text (an enrichment summary, its key points), those no passage of the text
    supports, with the reason; the same checks an answer's claims get (values, names, polarity)."""
    verifier = Verifier(passages(text), embed=embed)
    out = {}
    for sentence in sentences:
        for claim in verifier.check(sentence):
            if claim.supported is False:
                out[sentence] = PROBLEM_REASONS.get(claim.problem, PROBLEM_REASONS[""])
                break
    return out
