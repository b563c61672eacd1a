"""Decide whether a document is prose (documental) or code, and what type of file it is."""

from __future__ import annotations

from pathlib import PurePosixPath

from django.utils.translation import gettext_lazy as _

PROSE_TYPES = {
    ".md": "markdown", ".markdown": "markdown", ".mdx": "markdown", ".txt": "text", ".text": "text",
    ".rst": "rst", ".rest": "rst", ".html": "html", ".htm": "html", ".xhtml": "html", ".pdf": "pdf",
    ".adoc": "text", ".org": "text", ".tex": "text", ".csv": "text", ".tsv": "text",
    ".docx": "docx", ".xlsx": "xlsx", ".pptx": "pptx", ".odt": "odt", ".ods": "ods", ".odp": "odp",
}  # fmt: skip
# Images are read only where they are attachments (a vault's; knowledge/ingest/walker.py lets them through there),
# by OCR; they are not among the formats an upload or a folder takes.
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff"})
IMAGE_TYPES = dict.fromkeys(sorted(IMAGE_SUFFIXES), "image")
CODE_TYPES = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".jsx": "javascript", ".ts": "typescript", ".tsx": "tsx", ".go": "go", ".rs": "rust", ".java": "java",
    ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp",
    ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".cs": "csharp", ".rb": "ruby", ".php": "php",
    ".swift": "swift", ".sh": "bash", ".bash": "bash", ".zsh": "bash", ".fish": "shell", ".ps1": "powershell",
    ".sql": "sql", ".r": "r", ".lua": "lua", ".pl": "perl", ".pm": "perl", ".ex": "elixir", ".exs": "elixir",
    ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml", ".clj": "clojure", ".dart": "dart", ".vue": "vue",
    ".svelte": "svelte", ".css": "css", ".scss": "css", ".less": "css", ".toml": "toml", ".yaml": "yaml",
    ".yml": "yaml", ".json": "json", ".xml": "xml", ".ini": "ini", ".cfg": "ini", ".conf": "ini",
    ".gradle": "groovy", ".groovy": "groovy", ".tf": "hcl", ".proto": "protobuf", ".graphql": "graphql",
    ".cmake": "cmake", ".mk": "make", ".bat": "batch", ".vim": "vim", ".el": "lisp", ".nix": "nix",
}  # fmt: skip
CODE_BASENAMES = {
    "makefile": "make", "gnumakefile": "make", "dockerfile": "dockerfile", "containerfile": "dockerfile",
    "jenkinsfile": "groovy", "vagrantfile": "ruby", "rakefile": "ruby", "gemfile": "ruby", "procfile": "text",
    "cmakelists.txt": "cmake", "justfile": "make", "build": "starlark", "workspace": "starlark",
}  # fmt: skip
PROSE_BASENAMES = {
    "readme", "license", "licence", "copying", "authors", "contributors", "changelog", "changes", "news",
    "history", "notice", "todo", "install", "contributing", "security", "code_of_conduct", "maintainers",
}  # fmt: skip
SHEBANG_LANGUAGES = {"python": "python", "bash": "bash", "sh": "bash", "zsh": "bash", "node": "javascript",
                     "ruby": "ruby", "perl": "perl", "php": "php", "lua": "lua"}  # fmt: skip
MODES = ("auto", "documental", "code")
FORMAT_NAMES = {
    "markdown": "Markdown", "text": _("plain text"), "rst": "reStructuredText", "html": "HTML",
    "pdf": _("PDF (scanned pages read by OCR)"), "docx": "Word", "xlsx": "Excel", "pptx": "PowerPoint",
    "odt": _("OpenDocument text"), "ods": _("OpenDocument spreadsheet"), "odp": _("OpenDocument presentation"),
}  # fmt: skip


def accepted_formats() -> list[tuple[str, list[str]]]:
    """What the extractor reads, from the same tables it classifies by: (name, extensions), prose formats first,
    then source code (every language of CODE_TYPES) and zip archives (their members, expanded)."""
    grouped: dict[str, list[str]] = {}
    for suffix, source_type in PROSE_TYPES.items():
        grouped.setdefault(source_type, []).append(suffix)
    formats = [(str(FORMAT_NAMES.get(source_type, source_type)), suffixes) for source_type, suffixes in grouped.items()]
    languages = len(set(CODE_TYPES.values()) | set(CODE_BASENAMES.values()))
    code = str(_("source code (%(count)d languages)")) % {"count": languages}
    return [*formats, (code, sorted(CODE_TYPES)), (str(_("zip archives")), [".zip"])]


def classify(key: str, head: str = "", *, forced: str = "auto") -> tuple[str, str]:
    """Return (mode, source_type) for a document key and the start of its text.

    Order: the caller's forced mode, then the extension (so `install.sh` is code), then canonical
    basenames (`Makefile` is code; `README`, `LICENSE` are prose), then a shebang sniff.
    """
    if forced not in MODES:
        raise ValueError(f"Unknown mode {forced!r}; use one of {', '.join(MODES)}.")
    mode, source_type = _auto(key, head)
    if forced != "auto":
        mode = forced
    return mode, source_type


def _auto(key: str, head: str) -> tuple[str, str]:
    name = PurePosixPath(key).name
    lowered = name.lower()
    suffix = PurePosixPath(lowered).suffix
    if lowered in CODE_BASENAMES:
        return "code", CODE_BASENAMES[lowered]
    if suffix in PROSE_TYPES:
        return "documental", PROSE_TYPES[suffix]
    if suffix in IMAGE_TYPES:
        return "documental", "image"
    if suffix in CODE_TYPES:
        return "code", CODE_TYPES[suffix]
    stem = lowered.split(".", 1)[0]
    if stem in PROSE_BASENAMES:
        return "documental", "text"
    if lowered.startswith("dockerfile"):
        return "code", "dockerfile"
    if head.startswith("#!"):
        interpreter = head.splitlines()[0][2:].strip().split()
        if interpreter:
            program = interpreter[-1] if interpreter[0].endswith("/env") and len(interpreter) > 1 else interpreter[0]
            program = program.rsplit("/", 1)[-1].rstrip("0123456789.")
            return "code", SHEBANG_LANGUAGES.get(program, "shell")
    return "documental", "text"
