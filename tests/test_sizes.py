"""Size limits on the package's source (issue #30 item 6): no file over 600 lines, no function
over 80 (every def: nested ones and methods too), no class over 200.  A function's or class's
size runs from its ``def``/``class`` line to its last line (decorators not counted, its
docstring counted)."""

import ast
import pathlib

import sgmfast

ROOT = pathlib.Path(sgmfast.__file__).parent

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_CLASS_LINES = 200


def _sources():
    paths = sorted(ROOT.rglob("*.py"))
    assert ROOT / "__init__.py" in paths, f"no sources found under {ROOT}"
    return paths


def _where(path: pathlib.Path, line: int) -> str:
    return f"{path.relative_to(ROOT.parent)}:{line}"


def _too_long(kinds, limit: int) -> list:
    """'file:line name (n lines)' of every node of ``kinds`` longer than ``limit`` lines."""
    over = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, kinds):
                size = node.end_lineno - node.lineno + 1
                if size > limit:
                    over.append(f"{_where(path, node.lineno)} {node.name} ({size} lines)")
    return over


def test_no_file_over_600_lines():
    over = []
    for path in _sources():
        size = len(path.read_text().splitlines())
        if size > MAX_FILE_LINES:
            over.append(f"{_where(path, 1)} ({size} lines)")
    assert not over, f"files over {MAX_FILE_LINES} lines:\n" + "\n".join(over)


def test_no_function_over_80_lines():
    over = _too_long((ast.FunctionDef, ast.AsyncFunctionDef), MAX_FUNCTION_LINES)
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(over)


def test_no_class_over_200_lines():
    over = _too_long(ast.ClassDef, MAX_CLASS_LINES)
    assert not over, f"classes over {MAX_CLASS_LINES} lines:\n" + "\n".join(over)
