"""The package's import graph, read from the source: no cycles between modules (imports
inside functions counted), and an import inside a function only where it defers a heavy
optional dependency, saying which (docs/development.md#imports)."""

import ast
from functools import cache
from pathlib import Path

import fedjoule

PACKAGE = Path(fedjoule.__file__).parent
# Imports inside functions, all modules counted, each a deferral of a heavy dependency
# with a `# deferred:` comment above its block. Lower MAX_INNER as they go (issue 27's
# target: at most 40 in all).
MAX_INNER = 38
UNSAID = 0  # inner imports without a `# deferred:` comment above their block
DEFERRED = "# deferred:"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The fedjoule modules an import statement loads: `from pkg import name` is the
    submodule pkg.name when there is one, else pkg; relative imports resolved."""
    if isinstance(node, ast.Import):
        return [m for a in node.names if (m := known(a.name))]
    target = node.module or ""
    if node.level:
        base = module.split(".")
        if MODULES[module].name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - node.level + 1]
        target = ".".join([*base, target] if target else base)
    if not target.startswith("fedjoule"):
        return []
    loaded = [f"{target}.{a.name}" for a in node.names]
    return [m for m in (n if n in MODULES else known(target) for n in loaded) if m]


def known(name: str) -> str | None:
    """The module `name` is or lies in (a.b.c -> a.b when c is a name, not a module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def type_checking_only(tree: ast.Module) -> set[int]:
    """The import statements under `if TYPE_CHECKING:` (never run)."""
    return {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for n in ast.walk(block)
    }


def in_functions(tree: ast.Module) -> dict[int, int]:
    """Each import inside a function (its id) -> the first line of its block: the run of
    import statements one after another in the same body (one comment above a block
    says why for all of them)."""
    first = {}
    for f in ast.walk(tree):
        if not isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        # every statement list: bodies, else branches, handlers, finally blocks
        bodies = (
            getattr(n, part, None) for n in ast.walk(f) for part in ("body", "orelse", "finalbody")
        )
        for body in bodies:
            block_start = None
            for statement in body if isinstance(body, list) else ():
                if isinstance(statement, ast.Import | ast.ImportFrom):
                    block_start = block_start or statement.lineno
                    first[id(statement)] = block_start
                else:
                    block_start = None
    return first


@cache
def read_graph() -> tuple[dict[str, set[str]], list[tuple[str, int, bool]]]:
    """Each module's imported fedjoule modules, and every import inside a function as
    (module, line, whether a `# deferred:` comment says why)."""
    edges, inner = {}, []
    for module, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        lines, tree = text.splitlines(), ast.parse(text)
        skipped, local = type_checking_only(tree), in_functions(tree)
        edges[module] = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in skipped:
                continue
            edges[module].update(m for m in imported(module, node) if m != module)
            if id(node) in local:  # the line above its block, the block down to it
                said = lines[local[id(node)] - 2 : node.end_lineno]
                inner.append((module, node.lineno, any(DEFERRED in line for line in said)))
    return edges, inner


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_reader_resolves_every_form_of_import():
    edges, _ = read_graph()
    # from fedjoule.simulator import protocols -> the submodule; relative -> absolute
    assert "fedjoule.simulator.checkpoint" in edges["fedjoule.planning.sweep"]
    assert "fedjoule.algorithms.executor" in edges["fedjoule.algorithms.learning"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    found = cycles(read_graph()[0])
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_imports_inside_functions_only_defer_heavy_dependencies():
    _, inner = read_graph()
    unsaid = [f"{module}:{line}" for module, line, said in inner if not said]
    assert len(inner) <= MAX_INNER, f"{len(inner)} imports inside functions, at most {MAX_INNER}"
    assert len(unsaid) <= UNSAID, (
        f"{len(unsaid)} imports inside functions without a '{DEFERRED} <what>' comment "
        f"(at most {UNSAID}): move them to the top, or say which heavy optional dependency "
        f"they defer: {unsaid}"
    )
    outside = [u for u in unsaid if not u.startswith(("fedjoule.cli:", "fedjoule.api:"))]
    assert outside == [], f"imports inside functions that defer nothing: {outside}"
