"""No app reaches into another app's private names (the import-linter contracts in pyproject.toml check
which app may import which; scripts/test.sh runs them)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("ragsite", "tenants", "inference", "knowledge", "chat")


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
