"""What a code file defines, from a real parser: functions, classes, methods, module-level constants and
assignments, class attributes and parameters with defaults, each with its qualified name, line and signature; and the
file's card (path, module docstring, imports, top-level definitions with signatures and first docstring lines).

Python through `ast`; the other languages the code chunker reads through the same tree-sitter grammars
(knowledge/ingest/chunkers.py). The pipeline gives each code chunk the names it defines (`Chunk.defines`, in the
point's payload: an identifier of a question that names a definition finds its chunk inside the vector query) and
adds the card as one more retrievable unit, which a hit expands to the file's best chunks (knowledge/search)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

CARD_CHARS = 2000  # a card longer than this lists its first definitions and says how many more there are
DOC_CHARS = 160  # the first docstring line kept for a definition
MAX_SYMBOLS = 2000  # per file: a generated file of thousands of constants indexes its first ones


@dataclass(frozen=True)
class Symbol:
    name: str  # "send", "DEFAULT_LIMITS", "pool_size"
    qualname: str  # "Client.send", "DEFAULT_LIMITS", "Client.__init__.pool_size"
    kind: str  # function, class, method, constant, variable, attribute, parameter, …
    line: int  # 1-based line of the definition
    signature: str = ""  # "def send(self, request, *, stream=False)", "DEFAULT_MAX_REDIRECTS = 20"
    doc: str = ""  # the first line of its docstring or leading comment
    top: bool = False  # a top-level definition of the file (listed on its card)

    def keys(self) -> list[str]:
        """What a question may call it: its name and its qualified name as written (a question that writes a
        capital means it: SCHEMA is not Schema), and lower case (for one that writes none)."""
        return list(dict.fromkeys([self.name, self.qualname, self.name.lower(), self.qualname.lower()]))


@dataclass
class FileSymbols:
    symbols: list[Symbol]
    docstring: str = ""
    imports: list[str] | None = None


def _first_line(text: str | None) -> str:
    for line in (text or "").strip().splitlines():
        if line.strip():
            return line.strip()[:DOC_CHARS]
    return ""


def _unparse(node: ast.AST | None, limit: int = 80) -> str:
    if node is None:
        return ""
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001  (an exotic node: shown without its value)
        return ""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _python_signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {_unparse(node.returns, 40)}" if node.returns is not None else ""
    return f"{prefix} {node.name}({_unparse(node.args, 160)}){returns}"


def _targets(node: ast.Assign | ast.AnnAssign) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names = []
    for target in targets:
        for part in ast.walk(target):
            if isinstance(part, ast.Name):
                names.append(part.id)
    return names


def python_symbols(text: str) -> FileSymbols | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    found: list[Symbol] = []
    imports: list[str] = []

    def visit(body: list[ast.stmt], prefix: str, in_class: bool, top: bool) -> None:
        for node in body:
            if len(found) >= MAX_SYMBOLS:
                return
            if isinstance(node, ast.Import | ast.ImportFrom) and top:
                module = getattr(node, "module", None) or ""
                imports.extend(f"{module}.{a.name}" if module else a.name for a in node.names)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                qualname = f"{prefix}{node.name}"
                kind = "method" if in_class else "function"
                found.append(Symbol(node.name, qualname, kind, node.lineno, _python_signature(node),
                                    _first_line(ast.get_docstring(node)), top))  # fmt: skip
                arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                defaults = [*([None] * (len(node.args.posonlyargs) + len(node.args.args) - len(node.args.defaults))),
                            *node.args.defaults, *node.args.kw_defaults]  # fmt: skip
                for argument, default in zip(arguments, defaults, strict=False):
                    if default is not None:
                        found.append(Symbol(argument.arg, f"{qualname}.{argument.arg}", "parameter", node.lineno,
                                            f"{argument.arg}={_unparse(default, 60)}"))  # fmt: skip
                visit(node.body, f"{qualname}.", in_class=False, top=False)
            elif isinstance(node, ast.ClassDef):
                qualname = f"{prefix}{node.name}"
                bases = ", ".join(_unparse(b, 40) for b in node.bases)
                found.append(Symbol(node.name, qualname, "class", node.lineno,
                                    f"class {node.name}({bases})" if bases else f"class {node.name}",
                                    _first_line(ast.get_docstring(node)), top))  # fmt: skip
                visit(node.body, f"{qualname}.", in_class=True, top=False)
            elif isinstance(node, ast.Assign | ast.AnnAssign) and (top or in_class):
                value = _unparse(node.value, 80)
                for name in _targets(node):
                    kind = "attribute" if in_class else ("constant" if name.isupper() else "variable")
                    found.append(Symbol(name, f"{prefix}{name}", kind, node.lineno,
                                        f"{name} = {value}" if value else name, top=top))  # fmt: skip
            elif isinstance(node, ast.If | ast.Try | ast.With) and (top or in_class):  # TYPE_CHECKING, try-imports
                for block in (getattr(node, "body", []), getattr(node, "orelse", []),
                              *[h.body for h in getattr(node, "handlers", [])]):  # fmt: skip
                    visit(block, prefix, in_class, top)

    visit(tree.body, "", in_class=False, top=True)
    return FileSymbols(found, _first_line(ast.get_docstring(tree)), imports)


# tree-sitter node types that define something named by their `name` field, across the grammars we load
DEFINITION_TYPES = {
    "function_declaration": "function", "function_definition": "function", "function_item": "function",
    "generator_function_declaration": "function", "method_definition": "method", "method_declaration": "method",
    "method": "method", "singleton_method": "method", "class_declaration": "class", "class_definition": "class",
    "class": "class", "module": "module", "interface_declaration": "interface", "enum_declaration": "enum",
    "enum_item": "enum", "struct_item": "struct", "trait_item": "trait", "type_alias_declaration": "type",
    "type_item": "type", "type_spec": "type", "const_item": "constant", "static_item": "constant",
    "const_spec": "constant", "var_spec": "variable", "variable_declarator": "variable",
    "field_declaration": "attribute", "public_field_definition": "attribute", "constructor_declaration": "method",
    "struct_specifier": "struct", "enum_specifier": "enum", "mod_item": "module", "impl_item": "impl",
    "macro_definition": "macro", "preproc_def": "constant", "preproc_function_def": "macro",
}  # fmt: skip
CONTAINERS = {"class", "interface", "struct", "trait", "impl", "module", "enum"}
NAME_FIELDS = ("name", "declarator", "type")


def _node_name(node: Any) -> str:
    for field in NAME_FIELDS:
        child = node.child_by_field_name(field)
        while child is not None and child.type not in ("identifier", "type_identifier", "field_identifier",
                                                       "property_identifier", "constant", "name"):  # fmt: skip
            inner = child.child_by_field_name("declarator") or child.child_by_field_name("name")
            if inner is None:
                break
            child = inner
        if child is not None and child.text:
            text = child.text.decode("utf-8", "replace")
            if re.fullmatch(r"[A-Za-z_$][\w$]*", text):
                return text
    return ""


def _comment_before(node: Any) -> str:
    previous = node.prev_named_sibling
    if previous is not None and "comment" in previous.type and previous.end_point[0] >= node.start_point[0] - 1:
        text = previous.text.decode("utf-8", "replace") if previous.text else ""
        return _first_line(re.sub(r"^\s*(/\*\*?|\*/?|//+|#+)\s?", "", text, flags=re.M))
    return ""


def tree_sitter_symbols(text: str, parser: Any) -> FileSymbols:
    tree = parser.parse(text.encode("utf-8"))
    found: list[Symbol] = []
    imports: list[str] = []
    stack = [(tree.root_node, "", True)]
    while stack and len(found) < MAX_SYMBOLS:
        node, prefix, top = stack.pop()
        kind = DEFINITION_TYPES.get(node.type)
        name = _node_name(node) if kind else ""
        if "import" in node.type and top and node.text:
            imports.append(" ".join(node.text.decode("utf-8", "replace").split())[:120])
        qualname = f"{prefix}{name}" if name else prefix.rstrip(".")
        if name:
            first = (node.text or b"").decode("utf-8", "replace").split("\n", 1)[0].strip()[:160]
            found.append(Symbol(name, qualname, kind or "", node.start_point[0] + 1, first, _comment_before(node),
                                top))  # fmt: skip
        inside = f"{qualname}." if name and kind in CONTAINERS else prefix
        deeper = top and node.type in ("program", "source_file", "translation_unit", "export_statement",
                                       "lexical_declaration", "variable_declaration", "const_declaration",
                                       "var_declaration", "declaration", "module", "expression_statement")  # fmt: skip
        for child in reversed(node.named_children):
            stack.append((child, inside, deeper or (top and not name)))
    found.sort(key=lambda s: s.line)
    return FileSymbols(found, "", imports)


def file_symbols(text: str, language: str) -> FileSymbols | None:
    """The definitions of a code file (None: a language no parser here reads, or text it cannot parse)."""
    if language == "python":
        return python_symbols(text)
    from knowledge.ingest.chunkers import TREE_SITTER_GRAMMARS, tree_sitter_parser

    if language not in TREE_SITTER_GRAMMARS:
        return None
    try:
        return tree_sitter_symbols(text, tree_sitter_parser(language))
    except Exception:  # noqa: BLE001  (a grammar that is missing or fails: no symbols, the chunks still index)
        return None


def chunk_defines(symbols: FileSymbols, spans: list[tuple[int, int]]) -> list[list[str]]:
    """For each chunk's 1-based line span, the names (and qualified names) it defines, as written and lower case."""
    out: list[list[str]] = [[] for _ in spans]
    for symbol in symbols.symbols:
        for index, (start, end) in enumerate(spans):
            if start <= symbol.line <= end:
                out[index].extend(symbol.keys())
                break
    return [list(dict.fromkeys(names))[:200] for names in out]


def card_text(key: str, symbols: FileSymbols) -> str:
    """The file's card: what it is for and what it defines, in a page."""
    lines = [f"File {key}"]
    if symbols.docstring:
        lines.append(symbols.docstring)
    if symbols.imports:
        lines.append("Imports: " + ", ".join(dict.fromkeys(symbols.imports[:30])))
    listed = [s for s in symbols.symbols if s.top and s.kind not in ("parameter",)]
    members: dict[str, list[str]] = {}
    for symbol in symbols.symbols:
        if symbol.kind in ("method", "attribute") and "." in symbol.qualname:
            members.setdefault(symbol.qualname.rsplit(".", 1)[0], []).append(symbol.name)
    body, more = [], 0
    used = sum(len(line) + 1 for line in lines)
    for symbol in listed:
        entry = f"- {symbol.signature or symbol.name}" + (f": {symbol.doc}" if symbol.doc else "")
        if symbol.qualname in members:
            entry += f" (members: {', '.join(members[symbol.qualname][:12])})"
        if used + len(entry) + 1 > CARD_CHARS:
            more += 1
            continue
        body.append(entry)
        used += len(entry) + 1
    if body:
        lines.append("Defines:")
        lines.extend(body)
    if more:
        lines.append(f"… and {more} more definitions")
    return "\n".join(lines)
