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


def _pld_floors() -> dict:
    """The floor table of ``sgmfast/pld/__init__.py``'s docstring: {module: floor}."""
    import re

    doc = (ROOT / "pld" / "__init__.py").read_text()
    return {m: int(f) for f, m in re.findall(r"^(\d+) +``([\w.]+)``", doc, flags=re.M)}


PLD_FLOORS = _pld_floors()


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _edges():
    """Explicit imports between sgmfast modules (module level and inside functions): ``from P import
    n`` is an edge to P.n when that is a module, else to P."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    edges = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                for alias in node.names:
                    targets.append(f"{src}.{alias.name}" if f"{src}.{alias.name}" in modules else src)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            edges[name].update(t for t in targets if t in modules and t != name)
    return edges


def _floor(module: str):
    rel = module.removeprefix("sgmfast.pld.")
    if rel in PLD_FLOORS:
        return rel, PLD_FLOORS[rel]
    head = rel.split(".")[0]
    return head, PLD_FLOORS.get(head)


def test_no_import_cycle_anywhere_in_the_package():
    edges = _edges()
    state: dict = {}

    def visit(m, path):
        state[m] = 1
        for n in sorted(edges[m]):
            assert state.get(n) != 1, "import cycle: " + " -> ".join(path + [m, n])
            if n not in state:
                visit(n, path + [m])
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [])


def test_pld_modules_import_only_lower_floors():
    # certifiers never import the API, the samplers or the engine; the grid stages never import a
    # certifier; nothing below the API imports it
    edges = _edges()
    for module, deps in edges.items():
        if not module.startswith("sgmfast.pld.") or module == "sgmfast.pld":
            continue
        group, floor = _floor(module)
        assert floor is not None, f"{module}: not in the floor table of pld/__init__.py"
        for dep in deps:
            if not dep.startswith("sgmfast.pld"):
                continue
            assert dep != "sgmfast.pld", f"{module} imports the public package"
            dep_group, dep_floor = _floor(dep)
            same_package = dep_floor == floor and dep_group.split(".")[0] == group.split(".")[0]
            assert dep_floor < floor or same_package, f"{module} (floor {floor}) imports {dep} (floor {dep_floor})"


def test_the_stage_table_lists_every_pld_module():
    doc = (ROOT / "pld" / "__init__.py").read_text()
    for path in (ROOT / "pld").rglob("*.py"):
        if path.name != "__init__.py":
            dotted = ".".join(path.relative_to(ROOT / "pld").with_suffix("").parts)
            assert f"``{dotted}``" in doc or f"``{path.stem}``" in doc, \
                f"pld/__init__.py's table does not name {path.relative_to(ROOT)}"


def test_internal_failures_are_not_value_errors():
    # ValueError means bad input (raised at the API boundary); a grid that cannot be built or
    # finished raises a GridFailure, which the certifiers catch -- an unexpected ValueError from
    # inside them is a bug and must surface, not become a wider "certified" answer
    from sgmfast._failures import GridFailure, GridTooLarge, StepUnderflow, WorkLimit
    from sgmfast.pld.common import too_many_bins

    for cls in (GridFailure, GridTooLarge, StepUnderflow, WorkLimit):
        assert not issubclass(cls, ValueError)
    assert isinstance(too_many_bins(10**9), GridTooLarge)
    for path in [*(ROOT / "pld").rglob("*.py"), *(ROOT / "tuning").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
                reraises = any(isinstance(n, ast.Raise) for n in ast.walk(node))  # (input checks)
                assert "ValueError" not in names or reraises, f"{path.name}:{node.lineno} swallows a ValueError"
