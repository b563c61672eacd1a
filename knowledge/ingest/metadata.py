"""What a file says about itself: Markdown frontmatter, Office custom properties, OpenDocument user-defined fields.

Only the raw name → value pairs; knowledge/validity.py decides which ones count and checks them. A file whose
metadata cannot be read (broken YAML, a corrupt part) states nothing, and says why in `problems`.
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any

from defusedxml import ElementTree

OOXML_TYPES = ("docx", "xlsx", "pptx")
ODF_TYPES = ("odt", "ods", "odp")
MAX_PART_BYTES = 1 << 20  # a properties part larger than this is not read
MAX_HEADER_CHARS = 64 * 1024  # a frontmatter header longer than this is not read
MAX_HEADER_NODES = 5_000  # scalars, lists and maps in one header
MAX_HEADER_DEPTH = 32  # lists and maps inside each other in one header (a real one nests two or three)
MAX_PROBLEM_CHARS = 500  # one recorded problem, as stored and shown


class UnsafeYAML(ValueError):
    """A YAML header that is not read: aliases (a few hundred bytes can stand for gigabytes), or too large."""


def load_yaml(text: str) -> Any:
    """A small YAML document as str, list and dict (every scalar as written), read only after its events show it
    bounded: no aliases (`*name` reuses a node, so a 400-byte file can expand to gigabytes), at most
    MAX_HEADER_NODES nodes, at most MAX_HEADER_CHARS characters. UnsafeYAML or yaml.YAMLError otherwise."""
    import yaml

    if len(text) > MAX_HEADER_CHARS:
        raise UnsafeYAML(f"the header is longer than {MAX_HEADER_CHARS // 1024} KiB")
    nodes = depth = 0
    for event in yaml.parse(text, Loader=yaml.BaseLoader):  # events only: nothing is built or expanded
        if isinstance(event, yaml.AliasEvent):
            raise UnsafeYAML("the header uses a YAML alias (*name), which is not accepted")
        if isinstance(event, (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            nodes += 1
            if nodes > MAX_HEADER_NODES:
                raise UnsafeYAML(f"the header has more than {MAX_HEADER_NODES} values")
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1  # building a deeply nested value recurses once a level: bounded before it is built
            if depth > MAX_HEADER_DEPTH:
                raise UnsafeYAML(f"the header nests values more than {MAX_HEADER_DEPTH} levels deep")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
    return yaml.load(text, Loader=yaml.BaseLoader)  # noqa: S506  # BaseLoader builds only str, list, dict


FRONTMATTER_RE = re.compile(
    r"(?:---[ \t]*\r?\n.*?\r?\n(?:---|\.\.\.)"  # YAML: --- … --- (or …)
    r"|\+\+\+[ \t]*\r?\n.*?\r?\n\+\+\+)"  # TOML: +++ … +++
    r"[ \t]*(?:\r?\n|$)",
    re.S,
)


def normalise_newlines(text: str) -> str:
    return text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def split_frontmatter(text: str) -> tuple[str, str]:
    """(the header with its fence lines, the body): YAML between `---` lines (or `---` … `...`), or TOML between
    `+++` lines (Hugo's). A file without one is all body."""
    stripped = text.lstrip("\ufeff")
    match = FRONTMATTER_RE.match(stripped) if stripped.startswith(("---", "+++")) else None
    if match is None:
        return "", text
    return match.group(0), stripped[match.end() :]


def problem_text(text: str) -> str:
    """A recorded problem, cut to MAX_PROBLEM_CHARS (it quotes what the file says)."""
    return text if len(text) <= MAX_PROBLEM_CHARS else text[: MAX_PROBLEM_CHARS - 1] + "…"


def file_metadata(data: bytes, *, source_type: str) -> dict[str, Any]:
    """Name → value of the file's own metadata (read from its bytes: the extracted text has no frontmatter); a
    "problems" list when some of it could not be read."""
    try:
        if source_type == "markdown":
            return _frontmatter(normalise_newlines(data.decode("utf-8", errors="replace")))
        if source_type in OOXML_TYPES:
            return _ooxml_custom(data)
        if source_type in ODF_TYPES:
            return _odf_user_defined(data)
    except Exception as exc:  # a broken header is a reason on the version, never a failed document
        return {"problems": [problem_text(f"The file's metadata could not be read ({type(exc).__name__}: {exc}).")]}
    return {}


def _frontmatter(text: str) -> dict[str, Any]:
    """YAML frontmatter with every scalar read as written (YAML's own date reading would reject a whole header for
    one impossible date; knowledge/validity.py names each bad value instead)."""
    import frontmatter
    from frontmatter.default_handlers import YAMLHandler

    class AsWritten(YAMLHandler):
        def load(self, fm: str, **kwargs: object) -> Any:
            return load_yaml(fm)

    if not text.lstrip("\ufeff").startswith("---"):
        return {}
    metadata, _ = frontmatter.parse(text, handler=AsWritten())
    return dict(metadata) if isinstance(metadata, dict) else {}


def _part(data: bytes, name: str) -> bytes | None:
    with zipfile.ZipFile(io.BytesIO(data)) as bundle:
        try:
            info = bundle.getinfo(name)
        except KeyError:
            return None
        if info.file_size > MAX_PART_BYTES:
            return None
        return bundle.read(info)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _ooxml_custom(data: bytes) -> dict[str, Any]:
    """docProps/custom.xml: <property name="valid_until"><vt:lpwstr>2026-12-31</vt:lpwstr></property>."""
    part = _part(data, "docProps/custom.xml")
    if part is None:
        return {}
    found: dict[str, Any] = {}
    for prop in ElementTree.fromstring(part):
        name = prop.get("name")
        value = next(iter(prop), None)
        if name and value is not None:
            found[name] = (value.text or "").strip()
    return found


def _odf_user_defined(data: bytes) -> dict[str, Any]:
    """meta.xml: <meta:user-defined meta:name="valid_until">2026-12-31</meta:user-defined>."""
    part = _part(data, "meta.xml")
    if part is None:
        return {}
    found: dict[str, Any] = {}
    for element in ElementTree.fromstring(part).iter():
        if _local(element.tag) == "user-defined":
            name = next((v for k, v in element.attrib.items() if _local(k) == "name"), None)
            if name:
                found[name] = (element.text or "").strip()
    return found
