"""No function of the package over 80 lines, no module over 800 (issue 27): a long function
is split into named steps, a long module into modules of one concept each."""

import ast
from pathlib import Path

import fedjoule

PACKAGE = Path(fedjoule.__file__).parent
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 800


def test_no_function_over_80_lines_and_no_module_over_800():
    long_functions, long_modules = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(PACKAGE.parent)
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules.append(f"{name} ({len(text.splitlines())} lines)")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long_functions.append(f"{name}:{node.lineno} {node.name} ({lines} lines)")
    assert long_functions == [], f"functions over {MAX_FUNCTION_LINES} lines: {long_functions}"
    assert long_modules == [], f"modules over {MAX_MODULE_LINES} lines: {long_modules}"
