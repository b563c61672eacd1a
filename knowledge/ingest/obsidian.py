"""Read an Obsidian vault's notes as Obsidian shows them: wikilinks as their visible text, embeds as the embedded
section's text (marked, naming the note it comes from), frontmatter and inline tags, aliases, and the link graph.

Links resolve as Obsidian resolves them: a link with a folder part ("[[People/Ana]]") names the note whose path
ends with it; a bare name ("[[Ana]]") names the one note of that name anywhere in the vault, compared without
case and without ".md". A name two notes share is ambiguous and a name no note has is unresolved: both are
reported ("Notes/Meeting.md: [[Ana]] is ambiguous: Archive/Ana.md, People/Ana.md"), never guessed. Links inside
code (fenced blocks, inline spans) are text, as in Obsidian.

Pure functions over the vault's file list: the vault sync (knowledge/ingest/vault_sync.py) renders each note it
ingests and keeps the links (knowledge/links.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

from knowledge.ingest.metadata import UnsafeYAML, load_yaml, split_frontmatter

NOTE_SUFFIXES = (".md", ".markdown")
# [[target#heading|alias]] and ![[…]]: target without "]", "|" or "#"; Obsidian allows spaces in each part.
LINK_RE = re.compile(r"(!?)\[\[([^\[\]|#\n]*)(#[^\[\]|\n]*)?(?:\|([^\[\]\n]*))?\]\]")
FENCE_RE = re.compile(r"^(```|~~~)")
INLINE_CODE_RE = re.compile(r"(`+)(.+?)\1")
# #tag and #nested/tag: letters, digits, _ - /, not all digits; not a heading ("# Title"), not in a URL or word.
TAG_RE = re.compile(r"(?<![\w/#&;:=.-])#([\w/-]*[^\W\d][\w/-]*)")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
BLOCK_ID_RE = re.compile(r"\s\^([A-Za-z0-9-]+)\s*$")
MAX_EMBED_CHARS = 20_000  # one embed's text in the embedding note; the rest is cut, and says so
MAX_EMBEDS = 50  # embeds rendered per note; further ones are shown as links
NOT_SHOWN = "[embedded note not shown]"  # an embed some reader of the note may not see: no text, no name


@dataclass(frozen=True)
class Link:
    target: str  # as written, without heading: "People/Ana"
    heading: str  # "Role", "^block" or ""
    embed: bool
    carried: bool = False  # an embed whose text was rendered into the note


@dataclass
class Rendered:
    text: str
    links: list[Link] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    embedded: list[str] = field(default_factory=list)  # keys of the notes whose text was embedded


def is_note(key: str) -> bool:
    return key.lower().endswith(NOTE_SUFFIXES)


def _stem(key: str) -> str:
    """A vault key as links name it: without the note suffix, lower case (attachments keep their suffix)."""
    lowered = key.lower()
    for suffix in NOTE_SUFFIXES:
        if lowered.endswith(suffix):
            return lowered[: -len(suffix)]
    return lowered


class Vault:
    """The vault's files, for resolving links and reading what an embed embeds. `may_embed(note, embedded)` says
    whether every reader of the note may read the embedded one (by vault keys); when not, the embed renders as a
    placeholder. Without it every embed renders (a vault read by one reader, or in tests)."""

    def __init__(self, keys: list[str], root: Path | None = None,
                 may_embed: Callable[[str, str], bool] | None = None) -> None:  # fmt: skip
        self.root = root
        self.may_embed = may_embed or (lambda note, embedded: True)
        self.keys = sorted(keys)
        self._by_name: dict[str, list[str]] = {}
        self._by_path: dict[str, str] = {}
        for key in self.keys:
            stem = _stem(key)
            self._by_path[stem] = key
            self._by_name.setdefault(PurePosixPath(stem).name, []).append(key)
        self._texts: dict[str, str] = {}

    def resolve(self, target: str) -> tuple[str | None, list[str]]:
        """(the key, []) when the link names one file; (None, candidates) when it names several or none."""
        wanted = _stem(target.strip().replace("\\", "/").lstrip("/"))
        if not wanted:
            return None, []
        if wanted in self._by_path:
            return self._by_path[wanted], []
        if "/" in wanted:  # a partial path: the notes whose path ends with it
            matches = [key for stem, key in self._by_path.items() if stem.endswith("/" + wanted)]
        else:
            matches = self._by_name.get(wanted, [])
        if len(matches) == 1:
            return matches[0], []
        return None, sorted(matches)

    def problem(self, note: str, link: Link) -> str:
        """What is wrong with a link of `note` ("" when it resolves to one file)."""
        key, candidates = self.resolve(link.target)
        if key is not None or not link.target.strip():
            return ""
        written = f"[[{link.target}{'#' + link.heading if link.heading else ''}]]"
        if candidates:
            return f"{note}: {written} is ambiguous: {', '.join(candidates)}"
        return f"{note}: {written} resolves to no note"

    def text_of(self, key: str) -> str:
        if key not in self._texts:
            try:
                self._texts[key] = (self.root / key).read_text(encoding="utf-8", errors="replace") if self.root else ""
            except OSError:
                self._texts[key] = ""
        return self._texts[key]


def _listed(value: object) -> list[str]:
    """A frontmatter `tags`/`aliases` value: a YAML list, or a string of comma- or space-separated items."""
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    return [part.strip() for part in re.split(r"[,\n]", str(value)) if part.strip()]


def header_lists(header: str) -> tuple[list[str], list[str]]:
    """(tags, aliases) the frontmatter states; a header YAML cannot read states none (the validity fields name
    the problem, knowledge/ingest/metadata.py)."""
    if not header or header.startswith("+++"):  # a TOML header (Hugo's) states no Obsidian lists
        return [], []
    try:
        data = load_yaml(header.strip().strip("-").strip(".") or "{}")
    except (yaml.YAMLError, UnsafeYAML, RecursionError):
        return [], []
    if not isinstance(data, dict):
        return [], []
    tags = [t for raw in _listed(data.get("tags", data.get("tag"))) for t in raw.split() if t]
    return [t.lstrip("#") for t in tags], _listed(data.get("aliases", data.get("alias")))


def tag_names(tag: str) -> list[str]:
    """A nested tag and its parents, as Obsidian's tag search matches them: status/active → status, status/active."""
    parts = [p for p in tag.strip("/").split("/") if p]
    return ["/".join(parts[: n + 1]) for n in range(len(parts))]


def _outside_code(lines: list[str]) -> list[bool]:
    fenced, marks = False, []
    for line in lines:
        if FENCE_RE.match(line.lstrip()):
            marks.append(False)
            fenced = not fenced
            continue
        marks.append(not fenced)
    return marks


def _visible(target: str, heading: str, alias: str) -> str:
    """What Obsidian shows for a link: its alias, else the target (and " > heading")."""
    if alias.strip():
        return alias.strip()
    shown = target.strip()
    for suffix in NOTE_SUFFIXES:
        if shown.lower().endswith(suffix):
            shown = shown[: -len(suffix)]
    if heading and not heading.startswith("^"):
        return f"{shown} > {heading}" if shown else heading
    return shown or heading


def section(text: str, heading: str) -> str:
    """The part of a note an embed names: the whole body, a heading's section (to the next heading of its level or
    higher) or a block (the paragraph ending in ^id)."""
    _, body = split_frontmatter(text)
    if not heading:
        return body.strip()
    lines = body.splitlines()
    if heading.startswith("^"):
        block = heading[1:]
        for number, line in enumerate(lines):
            found = BLOCK_ID_RE.search(line)
            if found and found.group(1) == block:
                start = number
                while start > 0 and lines[start - 1].strip() and not HEADING_RE.match(lines[start - 1]):
                    start -= 1
                return "\n".join([*lines[start:number], BLOCK_ID_RE.sub("", line)]).strip()
        return ""
    wanted = heading.split("#")[-1].strip().lower()
    for number, line in enumerate(lines):
        match = HEADING_RE.match(line)
        if match and match.group(2).strip().lower() == wanted:
            level, end = len(match.group(1)), len(lines)
            for after in range(number + 1, len(lines)):
                other = HEADING_RE.match(lines[after])
                if other and len(other.group(1)) <= level:
                    end = after
                    break
            return "\n".join(lines[number:end]).strip()
    return ""


def render(vault: Vault, key: str, text: str) -> Rendered:
    """A note as its chunks should read: links as visible text, embeds expanded once (an embed inside an embed is
    shown as its link), aliases as a searchable line, and the note's tags and outgoing links."""
    header, body = split_frontmatter(text)
    tags, aliases = header_lists(header)
    result = Rendered(text="", aliases=aliases)
    lines = body.splitlines()
    out: list[str] = []
    for line, outside in zip(lines, _outside_code(lines), strict=True):
        if not outside:
            out.append(line)
            continue
        out.append(_render_line(vault, key, line, result, tags))
    result.tags = list(dict.fromkeys(name for tag in tags for name in tag_names(tag)))
    alias_line = f"Also known as: {', '.join(aliases)}\n\n" if aliases else ""
    result.text = header + alias_line + "\n".join(out) + ("\n" if body.endswith("\n") else "")
    return result


def _render_line(vault: Vault, key: str, line: str, result: Rendered, tags: list[str]) -> str:
    spans: list[tuple[int, int]] = [m.span() for m in INLINE_CODE_RE.finditer(line)]

    def in_code(position: int) -> bool:
        return any(start <= position < end for start, end in spans)

    tags.extend(m.group(1) for m in TAG_RE.finditer(line) if not in_code(m.start()))

    def replace(match: re.Match[str]) -> str:
        if in_code(match.start()):
            return match.group(0)
        bang, target, heading, alias = match.group(1), match.group(2), (match.group(3) or "")[1:], match.group(4)
        link = Link(target=target.strip(), heading=heading.strip(), embed=bool(bang))
        shown = _visible(target, heading, alias or "")
        rendered = _embed(vault, key, link, result, shown) if bang else shown
        if link.target or link.heading:
            carried = bool(bang) and rendered.startswith("\n[Embedded from ")
            result.links.append(Link(link.target, link.heading, link.embed, carried=carried))
        return rendered

    return LINK_RE.sub(replace, line)


def _embed(vault: Vault, key: str, link: Link, result: Rendered, shown: str) -> str:
    """An embed as the note shows it: the embedded section's text, marked; the link's visible text when it names no
    one note (an attachment is ingested as its own file); a placeholder when not every reader of the note may read
    the embedded one (its text is not copied: derived text never widens access)."""
    embedded, _ = vault.resolve(link.target) if link.target else (key, [])
    if embedded is None or not is_note(embedded) or len(result.embedded) >= MAX_EMBEDS:
        return shown
    if embedded != key and not vault.may_embed(key, embedded):
        return NOT_SHOWN
    part = section(vault.text_of(embedded), link.heading)
    part = LINK_RE.sub(lambda m: _visible(m.group(2), (m.group(3) or "")[1:], m.group(4) or ""), part)
    if not part:
        return shown
    if len(part) > MAX_EMBED_CHARS:
        part = part[:MAX_EMBED_CHARS] + " […]"
    result.embedded.append(embedded)
    where = embedded + (f"#{link.heading}" if link.heading else "")
    return f"\n[Embedded from {where}]\n{part}\n[End of embed from {embedded}]\n"


EMBED_BLOCK_RE = re.compile(
    r"\[Embedded from (?P<key>[^\]\n#]+)(?:#[^\]\n]*)?\]\n(?P<body>.*?)\n\[End of embed from (?P=key)\]", re.S
)


def embedded_source(text: str, cited: str) -> str:
    """The vault key of the note an embed put `cited` into this chunk's `text` from ("" when the cited text is the
    note's own): a citation of embedded text is a citation of the note it comes from."""
    wanted = " ".join(cited.split())
    if not wanted:
        return ""
    for match in EMBED_BLOCK_RE.finditer(text):
        if wanted in " ".join(match.group("body").split()):
            return match.group("key")
    return ""
