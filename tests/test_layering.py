"""No app reaches into another app's private names (the import-linter contracts in pyproject.toml check
which app may import which; scripts/test.sh runs them)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("ragsite", "core", "tenants", "inference", "knowledge", "agent_sessions", "chat", "feedback", "mcp_tools")


def test_no_module_imports_a_private_name_of_another_app():
    offences = []
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in APPS:
                    other = node.module.split(".")[0]
                    private = [a.name for a in node.names if a.name.startswith("_") and other != app]
                    if private:
                        offences.append(f"{path.relative_to(ROOT)} imports {', '.join(private)} from {node.module}")
    assert offences == []


DOORS = [
    "knowledge/api.py", "knowledge/views.py", "agent_sessions/api.py", "chat/api.py", "chat/openai_api.py",
    "chat/views.py", "chat/streaming.py", "chat/shapes.py", "chat/records.py",
    *(str(p.relative_to(ROOT)) for p in (ROOT / "mcp_tools").glob("*.py")),
    *(str(p.relative_to(ROOT)) for p in (ROOT / "feedback").glob("*.py")),
]  # fmt: skip
READ_MODELS = {"Document", "DocumentVersion", "Chunk", "Source", "IngestJob", "Tag"}


def test_no_door_queries_the_knowledge_models_itself():
    """Pages, REST, Dify, MCP and chat read documents, chunks, sources, jobs and tags through knowledge/selectors.py,
    so a scope rule (tenant, tags, sources) has one owner: `Model.objects` appears in no door."""
    offences = []
    for name in DOORS:
        tree = ast.parse((ROOT / name).read_text(), filename=name)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "objects"
                and isinstance(node.value, ast.Name)
                and node.value.id in READ_MODELS
            ):
                offences.append(f"{name}:{node.lineno} {node.value.id}.objects")
    assert offences == []


def test_the_ingest_job_state_changes_in_one_module():
    """Every transition of IngestJob.state is in knowledge/jobs.py (queue, start, checkpoint, fail, indexing,
    finish_if_indexed, recovery); nothing else assigns it or writes it in an update()."""
    offences = []
    for app in ("knowledge", "agent_sessions", "chat", "mcp_tools", "tenants", "ragsite"):
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts or path == ROOT / "knowledge" / "jobs.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Attribute) and node.attr == "state" and isinstance(node.ctx, ast.Store):
                    offences.append(f"{path.relative_to(ROOT)}:{node.lineno} assigns .state")
                writes = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "update", "create", "get_or_create", "update_or_create")  # fmt: skip
                if writes and any(k.arg == "state" for k in node.keywords):
                    offences.append(f"{path.relative_to(ROOT)}:{node.lineno} writes state=")
    assert offences == []


KIND_OWNERS = {"knowledge/ingest/sources.py", "knowledge/models.py"}


def test_only_the_source_registry_and_the_model_compare_a_source_or_job_kind():
    """A source kind's behaviour (syncable, its job, its location check, its sync) is declared once, in
    knowledge/ingest/sources.py; nothing else compares `.kind` of a source or a job (`==`, `!=`, `in`)."""
    offences = []
    for app in ("knowledge", "agent_sessions", "chat", "feedback", "mcp_tools", "tenants", "ragsite", "core"):
        for path in (ROOT / app).rglob("*.py"):
            name = str(path.relative_to(ROOT))
            if "migrations" in path.parts or name in KIND_OWNERS:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=name)):
                if not isinstance(node, ast.Compare):
                    continue
                text = ast.unparse(node)
                sides = [node.left, *node.comparators]
                of_source_or_job = [
                    s
                    for s in sides
                    if isinstance(s, ast.Attribute)
                    and s.attr == "kind"
                    and ("source" in ast.unparse(s.value) or "job" in ast.unparse(s.value))
                ]
                if of_source_or_job or "Source.Kind." in text or "IngestJob.Kind." in text:
                    offences.append(f"{name}:{node.lineno}")
    assert offences == []


def test_no_query_filters_and_no_template_names_a_source_kind():
    """Which kinds exist and what they do is the registry's: no query outside it filters sources or jobs by a kind
    written out (`filter(kind="git")`), and no template compares a source's or a job's kind."""
    offences = []
    for app in (
        "knowledge",
        "agent_sessions",
        "chat",
        "feedback",
        "mcp_tools",
        "tenants",
        "ragsite",
        "core",
        "identity",
    ):
        for path in (ROOT / app).rglob("*.py"):
            name = str(path.relative_to(ROOT))
            if "migrations" in path.parts or name in KIND_OWNERS:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=name)):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("filter", "exclude", "get", "update", "create")):  # fmt: skip
                    continue
                receiver = ast.unparse(node.func.value)
                if not any(word in receiver for word in ("source", "Source", "job", "IngestJob")):
                    continue
                for keyword in node.keywords:
                    value = ast.unparse(keyword.value) if keyword.value is not None else ""
                    literal = isinstance(keyword.value, ast.Constant) or "Source.Kind." in value
                    if keyword.arg in ("kind", "kind__in", "source__kind", "source__kind__in") and literal:
                        offences.append(f"{name}:{node.lineno}")
    pattern = re.compile(r"(source|job)\.kind\s*(==|!=|in\b)|\.source\.kind\s*(==|!=)")
    for path in (ROOT / "templates").rglob("*.html"):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if pattern.search(line):
                offences.append(f"{path.relative_to(ROOT)}:{number}")
    assert offences == []


def test_the_source_kinds_the_ids_the_model_and_the_registry_know_are_the_same():
    from knowledge.ids import KIND_RE
    from knowledge.ingest.sources import KINDS, creatable_kinds
    from knowledge.models import Source

    assert set(KINDS) == set(Source.Kind.values) and all(KIND_RE.match(kind) for kind in KINDS)
    assert "external" not in creatable_kinds() and "website" in creatable_kinds()


def test_only_the_key_door_opens_a_key_or_counts_a_key_or_a_wrong_one():
    """tenants/keys.py is the one place a raw key is looked up (api_key_authenticate), a wrong key counted and a key's
    requests counted (rate_hit); every door (REST, Dify, /v1, MCP) goes through it."""
    owners = {"tenants/keys.py": {"api_key_authenticate", "rate_hit", "window_count"},
              "tenants/throttling.py": {"rate_hit"}, "tenants/views.py": {"window_count"},  # password resets
              # the stdio proxy's early word on a bad key; each of its calls then goes through the HTTP door
              "mcp_tools/management/commands/mcp.py": {"api_key_authenticate"}}  # fmt: skip
    offences = []
    for app in ("knowledge", "agent_sessions", "chat", "feedback", "mcp_tools", "tenants", "ragsite", "core"):
        for path in (ROOT / app).rglob("*.py"):
            name = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text(), filename=name)):
                if isinstance(node, ast.Call):
                    called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                    if called in ("api_key_authenticate", "rate_hit", "window_count", "ApiKeyRateThrottle"):
                        if called not in owners.get(name, set()):
                            offences.append(f"{name}:{node.lineno} {called}")
    assert offences == []


def test_the_evaluation_run_state_changes_in_one_module():
    """Every transition of EvalRun.state is in feedback/runs.py (queue, claim, start, done, requeue, fail,
    fail_silent); nothing else assigns it or writes it in an update() or a create()."""
    offences = []
    for app in ("feedback", "knowledge", "agent_sessions", "chat", "mcp_tools", "ragsite"):
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts or path == ROOT / "feedback" / "runs.py":
                continue
            source = path.read_text()
            if "EvalRun" not in source:
                continue
            for node in ast.walk(ast.parse(source, filename=str(path))):
                if isinstance(node, ast.Attribute) and node.attr == "state" and isinstance(node.ctx, ast.Store):
                    offences.append(f"{path.relative_to(ROOT)}:{node.lineno}")
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "update", "create"
                ) and any(k.arg == "state" for k in node.keywords):  # fmt: skip
                    offences.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offences == []


def test_no_import_cycle_among_the_apps_modules_imports_inside_functions_included():
    """An import inside a function counts: with none of them closing a cycle, none exists to hide one (moving any
    to the top of its module would create no cycle)."""
    modules: dict[str, Path] = {}
    for app in (
        "ragsite",
        "core",
        "tenants",
        "inference",
        "knowledge",
        "agent_sessions",
        "chat",
        "feedback",
        "mcp_tools",
    ):
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" not in path.parts:
                name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                modules[name] = path
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            edges[name] |= {t for t in targets if t in modules and t != name}
    cycles = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(edges[name]):
            if state.get(target) == 1:
                cycles.append(" → ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(modules):
        if name not in state:
            visit(name, [name])
    assert cycles == []


DOOR_APPS = ("knowledge", "agent_sessions", "chat", "feedback", "identity", "tenants")
ERROR_DOORS = [
    *(
        f"{app}/{module}.py"
        for app in DOOR_APPS
        for module in ("api", "views")
        if (ROOT / app / f"{module}.py").exists()
    ),
    "chat/openai_api.py",
    "chat/see_as.py",
    "chat/streaming.py",
    "identity/signin.py",
    *(str(p.relative_to(ROOT)) for p in (ROOT / "mcp_tools").glob("*.py")),
]


def _domain_errors() -> set[str]:
    """The names of every DomainError subclass the apps define (every app's modules imported first)."""
    import importlib

    from core.problems import DomainError

    for app in (
        "core",
        "inference",
        "tenants",
        "knowledge",
        "agent_sessions",
        "chat",
        "feedback",
        "mcp_tools",
        "identity",
    ):
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts or "management" in path.parts:
                continue
            importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"))
    found, queue = set(), [DomainError]
    while queue:
        error = queue.pop()
        found.add(error.__name__)
        queue.extend(error.__subclasses__())
    return found


def test_no_door_catches_a_domain_error_itself():
    """The map from domain errors (core/problems.py) to each door's shape is core/transport.py's alone: a door runs a
    step through transport.guarded / attempt / stream_failure / tool_message, and never names a domain error in an
    `except` (one that only raises it again, to let the door answer it, excepted)."""
    errors = _domain_errors()
    assert {"IndexMismatch", "StoreBusy", "SessionGone", "AnswersBusy", "ModelUnavailable", "AccessEnded"} <= errors
    offences = []
    for name in ERROR_DOORS:
        tree = ast.parse((ROOT / name).read_text(), filename=name)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ExceptHandler) or node.type is None:
                continue
            caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            names = {c.attr if isinstance(c, ast.Attribute) else getattr(c, "id", "") for c in caught}
            only_raises = len(node.body) == 1 and isinstance(node.body[0], ast.Raise) and node.body[0].exc is None
            if names & errors and not only_raises:
                offences.append(f"{name}:{node.lineno} catches {', '.join(sorted(names & errors))}")
    assert offences == []


FMT_SKIPS = ROOT / "tests" / "fmt_skips.json"
FORMATTED = ("ragsite", "core", "tenants", "identity", "inference", "knowledge", "agent_sessions", "chat", "feedback",
             "mcp_tools", "insights")  # fmt: skip


def test_fmt_skip_only_falls():
    """`# fmt: skip` lines keep a hand layout the formatter cannot check: their count per file (tests/fmt_skips.json)
    may only fall, and a module not listed there (any new one) has none. Lower the file's number when you remove
    some; never raise it."""
    allowed = json.loads(FMT_SKIPS.read_text())
    over = []
    for app in FORMATTED:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = str(path.relative_to(ROOT))
            found = path.read_text().count("# fmt: skip")
            if found > allowed.get(name, 0):
                over.append(f"{name}: {found} (allowed {allowed.get(name, 0)})")
    assert over == []


def test_the_readme_layout_names_every_module_over_150_lines():
    """The README's layout is the map a new engineer reads first: every module over 150 lines is named in it."""
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout") :]
    layout = layout[: layout.index("\n## ", 4)] if "\n## " in layout[4:] else layout
    unnamed = []
    for app in FORMATTED:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts or len(path.read_text().splitlines()) <= 150:
                continue
            if path.name not in layout and path.stem not in layout:
                unnamed.append(str(path.relative_to(ROOT)))
    assert unnamed == []
