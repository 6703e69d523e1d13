"""The package's shape: dependencies flow one way, and the kernels stand alone."""

import ast
import pathlib

import sgmfast

ROOT = pathlib.Path(sgmfast.__file__).parent


def _imports(path: pathlib.Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield node.level, node.module or ""
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name


def test_kernels_import_nothing_from_the_rest_of_the_package():
    kernels = ROOT / "_kernels"
    for path in kernels.rglob("*.py"):
        depth = len(path.relative_to(kernels).parts) - 1  # 0: _kernels/x.py, 1: _kernels/pld/x.py
        for level, module in _imports(path):
            assert not module.startswith("sgmfast"), f"{path}: absolute import of {module}"
            # a relative import may climb at most to _kernels itself
            assert level <= depth + 1, f"{path}: imports {'.' * level}{module} from outside _kernels"


def test_pld_stages_do_not_import_the_public_layer():
    # stages and certifiers below the engine never reach up to the API or the engine
    below = {"common", "onestep", "tilting", "windows", "composition", "two_stage", "tail_events", "queries",
             "exact", "estimates", "certifiers"}
    for name in below:
        for level, module in _imports(ROOT / "pld" / f"{name}.py"):
            if level == 1:
                assert module.split(".")[0] not in {"engine", "accountant"}, f"pld/{name}.py imports {module}"


def test_internal_failures_are_not_value_errors():
    # ValueError means bad input (raised at the API boundary); a grid that cannot be built or
    # finished raises a GridFailure, which the certifiers catch -- an unexpected ValueError from
    # inside them is a bug and must surface, not become a wider "certified" answer
    from sgmfast._failures import GridFailure, GridTooLarge, StepUnderflow, WorkLimit
    from sgmfast.pld.common import too_many_bins

    for cls in (GridFailure, GridTooLarge, StepUnderflow, WorkLimit):
        assert not issubclass(cls, ValueError)
    assert isinstance(too_many_bins(10**9), GridTooLarge)
    for path in [*(ROOT / "pld").glob("*.py"), *(ROOT / "tuning").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
                reraises = any(isinstance(n, ast.Raise) for n in ast.walk(node))  # (input checks)
                assert "ValueError" not in names or reraises, f"{path.name}:{node.lineno} swallows a ValueError"
