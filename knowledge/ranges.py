"""A table's cell that names a range ("3 to 5 years", "Under 100 units", "50,000 EUR or more", "de 1 a 2 años",
"más de 10 años") read as its bounds, so a question that states a position ("after four years", "a sale of 30,000
EUR") is computed against the right row: the engine (knowledge/compute.py) offers `in_range(column, number)`.

Read by rules, in English and Spanish; a cell no rule reads is not a range (None). A number keeps its thousands
separators out ("10,000", "10.000": three digits after the mark) and reads a lone decimal comma ("2,5")."""

from __future__ import annotations

import re
from dataclasses import dataclass

NUMBER = r"\d+(?:[.,]\d+)*"
_BELOW = r"less than|fewer than|under|below|menos de|inferior(?:es)? a|por debajo de"
_UP_TO = r"up to|at most|no more than|hasta|como m[aá]ximo"
_ABOVE = r"more than|over|above|greater than|m[aá]s de|superior(?:es)? a|por encima de"
_AT_LEAST = r"at least|from|starting at|a partir de|desde|como m[ií]nimo|al menos"
_OR_MORE = r"or more|and more|and above|and over|or over|or above|\+|o m[aá]s|y m[aá]s|en adelante|o superior"
_OR_LESS = r"or less|or fewer|and under|and below|o menos|o inferior"
_BETWEEN = r"(?:from|between|de|desde|entre)?\s*"
_TO = r"to|through|until|and|-|–|—|a|y|hasta|al"
WORDS = r"[^\d<>=≤≥+]*?"  # a unit or currency between a number and what follows ("10,000 EUR or more")


@dataclass(frozen=True)
class Bounds:
    low: float | None  # None: no lower bound
    high: float | None
    low_included: bool = True
    high_included: bool = True

    def holds(self, number: float) -> bool:
        if self.low is not None and (number < self.low or (number == self.low and not self.low_included)):
            return False
        return not (self.high is not None and (number > self.high or (number == self.high and not self.high_included)))


def number_of(text: str) -> float | None:
    """A written number: `10,000` and `10.000` (a mark before three digits groups thousands), `2,5` and `2.5`."""
    text = text.strip().rstrip(".,")
    if not re.fullmatch(NUMBER, text):
        return None
    marks = re.findall(r"[.,]", text)
    groups = re.split(r"[.,]", text)
    if not marks:
        return float(text)
    if len(set(marks)) == 2:  # 1,234.5 or 1.234,5: the last mark is the decimal one
        whole, fraction = re.sub(r"[.,]", "", "".join(groups[:-1])), groups[-1]
        return float(f"{whole}.{fraction}")
    if len(marks) > 1:  # 1,234,567: thousands only
        return float("".join(groups)) if all(len(g) == 3 for g in groups[1:]) else None
    if len(groups[1]) == 3 and groups[0] != "0":  # 10,000 or 10.000
        return float("".join(groups))
    return float(".".join(groups))  # 2,5 or 0.26


def _n(text: str) -> float:
    value = number_of(text)
    if value is None:
        raise ValueError(text)
    return value


_RULES: list[tuple[re.Pattern[str], object]] = [
    (re.compile(rf"^(?:<=|≤)\s*({NUMBER})"), lambda m: Bounds(None, _n(m[1]))),
    (re.compile(rf"^(?:>=|≥)\s*({NUMBER})"), lambda m: Bounds(_n(m[1]), None)),
    (re.compile(rf"^<\s*({NUMBER})"), lambda m: Bounds(None, _n(m[1]), high_included=False)),
    (re.compile(rf"^>\s*({NUMBER})"), lambda m: Bounds(_n(m[1]), None, low_included=False)),
    (re.compile(rf"^(?:{_BELOW})\s+({NUMBER})"), lambda m: Bounds(None, _n(m[1]), high_included=False)),
    (re.compile(rf"^(?:{_UP_TO})\s+({NUMBER})"), lambda m: Bounds(None, _n(m[1]))),
    (re.compile(rf"^(?:{_ABOVE})\s+({NUMBER})"), lambda m: Bounds(_n(m[1]), None, low_included=False)),
    (re.compile(rf"^{_BETWEEN}({NUMBER}){WORDS}\s*(?:{_TO})\s*({NUMBER})"), lambda m: Bounds(_n(m[1]), _n(m[2]))),
    (re.compile(rf"^({NUMBER}){WORDS}\s*(?:{_OR_MORE})(?:\W|$)"), lambda m: Bounds(_n(m[1]), None)),
    (re.compile(rf"^({NUMBER}){WORDS}\s*(?:{_OR_LESS})(?:\W|$)"), lambda m: Bounds(None, _n(m[1]))),
    (re.compile(rf"^(?:{_AT_LEAST})\s+({NUMBER})(?!{WORDS}\s*(?:{_TO})\s*\d)"), lambda m: Bounds(_n(m[1]), None)),
]


def bounds(cell: str | None) -> Bounds | None:
    """The range a cell names, or None when it names none (a bare number is a value, not a range)."""
    if not cell or len(cell) > 200:  # a label, not a paragraph (the engine's function reads every cell it is given)
        return None
    text = " ".join(cell.casefold().split())
    for pattern, make in _RULES:
        match = pattern.search(text)
        if match:
            try:
                found = make(match)  # type: ignore[operator]
            except ValueError:
                return None
            if found.low is not None and found.high is not None and found.low > found.high:
                return None
            return found
    return None


def in_range(cell: str | None, number: float | int | str | None) -> int | None:
    """SQL's `in_range(column, number)`: 1 when the cell's range holds the number, 0 when not, NULL when the cell
    names no range or the number is none."""
    if isinstance(number, str):
        number = number_of(number)
    found = bounds(cell)
    if found is None or number is None:
        return None
    return int(found.holds(float(number)))


WRITTEN = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)*(?![\w])")


def numbers_written(text: str) -> list[float]:
    """The numbers a text writes in digits, thousands read as such ("30.000 EUR" → 30000)."""
    return [n for n in map(number_of, WRITTEN.findall(text)) if n is not None]


AMBIGUOUS = frozenset({"one", "uno", "una", "once"})  # "which one", "una tabla", "once" (English: one time)


def numbers_stated(text: str) -> set[float]:
    """The numbers a question states, in digits or words ("four", "cuatro"; not "one", "una": pronouns and
    articles)."""
    from knowledge.claims import NUMBER_VALUES

    words = re.findall(r"\b(" + "|".join(NUMBER_VALUES) + r")\b", text, re.IGNORECASE)
    return set(numbers_written(text)) | {float(NUMBER_VALUES[w.lower()]) for w in words if w.lower() not in AMBIGUOUS}


def is_range_column(values: list[str]) -> bool:
    """Whether a column holds ranges: at least two distinct values, each naming one."""
    distinct = set(values)
    return len(distinct) >= 2 and all(bounds(v) is not None for v in distinct)
