"""The seam a source kind plugs into: a producer only reads, and yields what it read; `SyncRun`
(knowledge/ingest/sync_run.py) does everything else — the job, the source's lock, the full-disk guard, the ingest of
each item, the retirements, the links, the stamp and the finish.

A producer is a function `produce(reading) -> Iterator[Event]`. It may read the store (what the last sync kept, a
document's access list) but never writes: no job, no document, no source row. What it yields:
- `Planned`: how many documents it expects (again whenever it learns more), and, for a kind that lists everything
  first, the files worth reading ahead (their embeddings computed while earlier ones are written);
- `Item`: a document's bytes (or the path to read them from), with its history, a move, its links;
- `Unchanged`: a document that is still there and did not change (kept, not read);
- `Skipped`: something it saw and will not index, with why; `Failed`: something it could not read, with why (the
  version a document had is kept when `keep`); `Gone`: a document it found removed (retired, like anything it did
  not yield);
- `Note`: a remark on what it left out that is not a document (links not followed); `Activity`: what it is doing
  now, for the job's page;
- `Access`: who may read a document now, as a system with permissions of its own says (a wiki's page rights); an
  `Item` carries its own, set before any of its text is stored;
- `Done`, last: its new sync state (stored on the source for the next sync), its report (on the job), and for a
  kind with commits the set still reachable (the others are marked `unreachable`).

A kind whose whole source cannot be read raises a `SourceProblem` (its message is the job's reason): nothing is
changed. Every kind's error derives from it, so no caller lists every kind's errors."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from knowledge.options import IngestOptions


class SourceProblem(Exception):
    """A source cannot be read at all (not one of its documents: the whole of it); the message says why, in words
    for the person who set it up. Every kind's errors derive from it."""


@dataclass(frozen=True)
class Past:
    """An earlier version of an item (a file's older commit), stored superseded and served over `window`. `read`
    gives its bytes when the sync writes it (b"": not worth keeping), so a long history is never held in memory at
    once."""

    read: Callable[[], bytes]
    mtime: float | None
    commit: dict
    window: tuple[Any, Any]


@dataclass(frozen=True)
class Planned:
    total: int
    ahead: tuple[tuple[int, str, Path], ...] = ()  # (position, key, path) of files to read ahead, in order


@dataclass(frozen=True)
class Item:
    key: str
    data: bytes | None = None  # None: read `path`
    path: Path | None = None
    position: int = 0
    mtime: float | None = None
    size: int | None = None
    location: str | None = None  # where a reader finds it (a page's URL); default: the path or the key
    commit: dict | None = None
    history: tuple[Past, ...] = ()
    moved_from: str = ""  # the key it had before (its document and history follow it)
    moved_how: str = "moved"  # in words on the job's list: "moved" or "renamed"
    tags: tuple[str, ...] = ()  # added to the sync's own
    links: tuple[Any, ...] | None = None  # the links it holds (knowledge/links.py), stored after the sync
    access: tuple[str, ...] | None = None  # who may read it, as its system says (None: its source's list)


@dataclass(frozen=True)
class Unchanged:
    key: str
    note: str = ""  # listed on the job's file list with this note when given
    counted: bool = True  # counts as a document the sync went through


@dataclass(frozen=True)
class Skipped:
    key: str
    reason: str
    counted: bool = False  # read, then left out (a page with no main text): counts as gone through


@dataclass(frozen=True)
class Failed:
    key: str
    reason: str
    kind: str = "error"
    keep: bool = True  # the version it had is kept (a page that cannot be read now)
    position: int = 0


@dataclass(frozen=True)
class Note:
    """A remark on the job's list of what the sync left out (links not followed from a page), not a document."""

    key: str
    text: str


@dataclass(frozen=True)
class Gone:
    key: str


@dataclass(frozen=True)
class Access:
    """Who may read a document now, as its system says (principals of knowledge/access.py; () admits only the
    tenant's admins): applied to the document's access list and its vector payloads, never re-embedded. A kind whose
    system has permissions of its own yields one for every document it still holds, in a sync and in a permission
    sync (`SourceKind.permissions`)."""

    key: str
    access: tuple[str, ...]


@dataclass(frozen=True)
class Activity:
    text: str


@dataclass(frozen=True)
class Done:
    state: dict | None = None  # None: the source's sync state is left as it was
    report: dict = field(default_factory=dict)  # merged into the job's params
    reachable: frozenset[str] | None = None  # commits the history still holds (a rewritten branch)


Event = Planned | Item | Unchanged | Skipped | Failed | Gone | Note | Access | Activity | Done


@dataclass(frozen=True)
class Reading:
    """What a producer is given: the source (to read, never to write), the location checked for this sync, its kind's
    typed options, the state its last sync left, the sync's ingest options, and the credential for its location."""

    source: Any
    location: str
    config: Any
    state: dict
    options: IngestOptions
    credential: str = ""


Produce = Callable[[Reading], Iterator[Event]]


@dataclass(frozen=True)
class KindConfig:
    """A kind's typed options, stored as JSON on the source (`Source.config`). A subclass declares its fields with
    `option(label, help)`: the pages, REST and the CLI read them from here. `check` refuses a bad value in words."""

    FIELDS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_dict(cls, values: dict | None) -> KindConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in (values or {}).items() if key in names})

    def as_dict(self) -> dict:
        return {key: value for key, value in dataclasses.asdict(self).items() if value not in ("", None)}

    def check(self) -> None:
        """Raise ValueError with the reason when a value cannot be used."""

    @classmethod
    def described(cls) -> list[dict[str, Any]]:
        """Each option's name, label, help and type, for the forms and the API's schema."""
        described = []
        for option_field in dataclasses.fields(cls):
            meta = option_field.metadata
            described.append(
                {
                    "name": option_field.name,
                    "label": meta.get("label", option_field.name),
                    "help": meta.get("help", ""),
                    "type": "int" if "int" in str(option_field.type) else "str",
                    "max_length": meta.get("max_length", 250),
                }
            )
        return described


def option(label: Any, help_text: Any = "", *, default: Any = "", max_length: int = 250) -> Any:
    """A kind option's field: its label and help (lazily translated strings), its default."""
    return field(default=default, metadata={"label": label, "help": help_text, "max_length": max_length})


@dataclass(frozen=True)
class NoConfig(KindConfig):
    """A kind with no options of its own."""
