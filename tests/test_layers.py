"""The house's structure as tests: which package may import which (:data:`LAYERS`), no import cycles between
modules, no module over 400 lines and no function over 80.

Every import counts, a function-local one and one under ``TYPE_CHECKING`` too: the source is walked as a
syntax tree, nothing is imported. What is wrong today is listed in one allowance per test, each entry with the
area that owns the fix; an entry that is fixed fails ``test_the_allowances_name_only_what_is_still_wrong``
until it is removed, so the lists only shrink.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import trainprobe

SRC = Path(trainprobe.__file__).parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80

#: the ground floor: standard library only, imported by everything above
GROUND = frozenset({"trainprobe", "errors", "visible", "json_names", "conventions", "plugins"})
_CAPABILITIES = GROUND | {"checkpoint", "metrics", "remote"}
_ANSWERS = _CAPABILITIES | {"save", "triage"}
_TASKS = _ANSWERS | {"tasks"}
_FACES = _TASKS | {"demo", "integrations"}

#: package (or ground-floor module) -> the trainprobe packages it may import besides its own modules;
#: ``trainprobe`` is the root ``__init__`` (``__version__``), shipped to the far side with ``errors``
LAYERS: dict[str, frozenset[str]] = {
    "trainprobe": frozenset({"errors"}),
    "errors": frozenset(),
    "visible": frozenset(),
    "json_names": frozenset(),
    "conventions": frozenset(),
    "plugins": frozenset(),
    "checkpoint": GROUND,
    "metrics": GROUND,
    # The engine knows no capability (what runs a capability's function remotely lives in tasks), and it is
    # shipped to the far side with errors alone.
    "remote": frozenset({"trainprobe", "errors"}),
    "save": _CAPABILITIES,
    "triage": _CAPABILITIES,
    "tasks": _ANSWERS,
    "demo": _TASKS,
    "integrations": _TASKS,
    "mcp": _FACES,
    "cli": _FACES | {"mcp"},  # `trainprobe mcp` starts the server; the server never imports the CLI
    "__main__": frozenset({"cli"}),
}

#: "importer -> imported" package pairs outside LAYERS that are known today (owner of the fix as a comment)
ALLOWED_LAYER_BREACHES: frozenset[str] = frozenset()

#: strongly connected groups of modules known today (owner of the fix as a comment)
ALLOWED_CYCLES: frozenset[frozenset[str]] = frozenset()

#: modules over MAX_MODULE_LINES known today -> owner of the fix
ALLOWED_LONG_MODULES: dict[str, str] = {}

#: functions over MAX_FUNCTION_LINES known today -> owner of the fix
ALLOWED_LONG_FUNCTIONS: dict[str, str] = {}

#: modules or functions that are data tables (a list of cases, a schema) and may be long: none today
DATA_TABLES: frozenset[str] = frozenset()

#: (module, name) that a module other than a package face may pass on from where it lives, with why
ALLOWED_RELAYS: dict[tuple[str, str], str] = {}


def _modules(root: Path = SRC) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package under ``root``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path) -> Iterator[tuple[str, str | None, int]]:
    """(module, name imported from it or None, line) of every import in the file, at any depth of the tree
    (inside functions, under ``if TYPE_CHECKING:``), relative imports resolved against ``name``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([module] if module else [])])
            for alias in node.names:
                yield module, alias.name, node.lineno


def _resolve(target: str, modules: dict[str, Path]) -> str | None:
    """The module of ours that ``target`` names (``a.b.c`` -> ``a.b`` when ``c`` is no module), or None."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (``from pkg import mod`` names ``pkg.mod``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        out: set[str] = set()
        for module, imported, _line in imports_of(name, path):
            full = f"{module}.{imported}" if imported else module
            found = _resolve(full if full in modules else module, modules)
            if found is not None and found != name:
                out.add(found)
        graph[name] = out
    return graph


def _package(module: str) -> str:
    """``trainprobe.metrics.readers.csv`` -> ``metrics``; the root package is ``trainprobe``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_breaches(modules: dict[str, Path]) -> dict[str, list[str]]:
    """ "importer -> imported" package pairs that LAYERS does not allow, with where each import is."""
    breaches: dict[str, list[str]] = {}
    for name, targets in import_graph(modules).items():
        source = _package(name)
        for target in targets:
            imported = _package(target)
            if imported != source and imported not in LAYERS.get(source, frozenset()):
                breaches.setdefault(f"{source} -> {imported}", []).append(f"{name} imports {target}")
    return breaches


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: set[frozenset[str]] = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.add(frozenset(group))
    return groups


def _long_functions(name: str, path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_bytes(), str(path))
    sizes = {
        f"{name}:{node.name}": (node.end_lineno or node.lineno) - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    return {key: n for key, n in sizes.items() if n > MAX_FUNCTION_LINES}


MODULES = _modules()


def test_every_package_has_a_layer() -> None:
    assert {_package(name) for name in MODULES} <= set(LAYERS)


def test_packages_import_only_the_layers_below() -> None:
    breaches = layer_breaches(MODULES)
    new = {pair: where for pair, where in breaches.items() if pair not in ALLOWED_LAYER_BREACHES}
    assert new == {}, "imports that break the layers of tests/test_layers.py (LAYERS)"


def test_the_ground_floor_imports_only_the_standard_library() -> None:
    outside = {
        f"{name}:{line}: {module}"
        for name, path in MODULES.items()
        if _package(name) in GROUND and _package(name) != "trainprobe"
        for module, _imported, line in imports_of(name, path)
        if module.partition(".")[0] not in sys.stdlib_module_names | {"__future__"}
    }
    assert sorted(outside) == []


def test_no_import_cycles() -> None:
    found = cycles(import_graph(MODULES))
    assert sorted(map(sorted, found - ALLOWED_CYCLES)) == [], "modules that import each other"


def _long_modules() -> dict[str, int]:
    sizes = {name: len(path.read_bytes().splitlines()) for name, path in MODULES.items()}
    return {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES and name not in DATA_TABLES}


def _all_long_functions() -> dict[str, int]:
    return {
        key: n
        for name, path in MODULES.items()
        for key, n in _long_functions(name, path).items()
        if key not in DATA_TABLES
    }


def test_no_module_over_400_lines() -> None:
    assert {k: v for k, v in _long_modules().items() if k not in ALLOWED_LONG_MODULES} == {}


def test_no_function_over_80_lines() -> None:
    assert {k: v for k, v in _all_long_functions().items() if k not in ALLOWED_LONG_FUNCTIONS} == {}


def test_the_allowances_name_only_what_is_still_wrong() -> None:
    """A fixed entry is taken out of its allowance (by whoever fixed it), so the lists only shrink."""
    stale = {
        "ALLOWED_LAYER_BREACHES": sorted(ALLOWED_LAYER_BREACHES - set(layer_breaches(MODULES))),
        "ALLOWED_CYCLES": sorted(map(sorted, ALLOWED_CYCLES - cycles(import_graph(MODULES)))),
        "ALLOWED_LONG_MODULES": sorted(set(ALLOWED_LONG_MODULES) - set(_long_modules())),
        "ALLOWED_LONG_FUNCTIONS": sorted(set(ALLOWED_LONG_FUNCTIONS) - set(_all_long_functions())),
        "ALLOWED_RELAYS": sorted(set(ALLOWED_RELAYS) - set(relays(MODULES))),
    }
    assert {name: entries for name, entries in stale.items() if entries} == {}, "fixed: remove these entries"


def _imported_only(path: Path) -> set[str]:
    """Names a module binds at its top level only by importing them (never by def, class or assignment)."""
    tree = ast.parse(path.read_bytes(), str(path))
    imported: set[str] = set()
    defined: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    return imported - defined


def relays(modules: dict[str, Path]) -> dict[tuple[str, str], list[str]]:
    """(module, name) -> its importers, where the name is imported from a module that only imported it
    itself: one name, two import paths. A package face (``__init__``) may pass names on: that is its job."""
    passed_on = {name: _imported_only(path) for name, path in modules.items() if path.name != "__init__.py"}
    found: dict[tuple[str, str], list[str]] = {}
    for name, path in modules.items():
        for module, imported, line in imports_of(name, path):
            if imported is not None and imported in passed_on.get(module, ()):
                found.setdefault((module, imported), []).append(f"{name}:{line}")
    return found


def test_a_name_has_one_import_path() -> None:
    found = {k: v for k, v in relays(MODULES).items() if k not in ALLOWED_RELAYS}
    assert found == {}, "import these from the module that defines them"


# --- the checks themselves ----------------------------------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    root = tmp_path / "trainprobe"
    for rel, text in {"__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return _modules(root)


def test_the_walk_sees_function_local_type_checking_and_relative_imports(tmp_path: Path) -> None:
    modules = _tree(tmp_path, {
        "remote/__init__.py": "",
        "remote/a.py": (
            "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from trainprobe.metrics import table\n"
            "def f():\n    from trainprobe.checkpoint.scan import scan\n    import trainprobe.errors\n"
            "from . import b\n"
        ),
        "remote/b.py": "",
        "metrics/__init__.py": "",
        "metrics/table.py": "",
        "checkpoint/__init__.py": "",
        "checkpoint/scan.py": "",
        "errors.py": "",
    })  # fmt: skip
    assert import_graph(modules)["trainprobe.remote.a"] == {
        "trainprobe.metrics.table", "trainprobe.checkpoint.scan", "trainprobe.errors", "trainprobe.remote.b",
    }  # fmt: skip
    assert set(layer_breaches(modules)) == {"remote -> metrics", "remote -> checkpoint"}


def test_the_cycle_check_finds_a_cycle_through_a_package_face(tmp_path: Path) -> None:
    modules = _tree(tmp_path, {
        "metrics/__init__.py": "from trainprobe.metrics.table import T\n",
        # a module by name is that module; a name the face holds is the face
        "metrics/table.py": "def f():\n    from trainprobe.metrics import axis, ROLES\n",
        "metrics/axis.py": "",
        "metrics/other.py": "from trainprobe.metrics import table\n",
    })  # fmt: skip
    graph = import_graph(modules)
    assert graph["trainprobe.metrics.table"] == {"trainprobe.metrics.axis", "trainprobe.metrics"}
    assert cycles(graph) == {frozenset({"trainprobe.metrics", "trainprobe.metrics.table"})}


def test_a_relay_is_seen(tmp_path: Path) -> None:
    modules = _tree(tmp_path, {
        "metrics/__init__.py": "from trainprobe.metrics.table import RunLog\n",
        "metrics/table.py": "class RunLog: ...\n",
        "metrics/analyze.py": "from trainprobe.metrics.table import RunLog\nLIMIT = 3\n",
        "cli/logs.py": (
            "from trainprobe.metrics import RunLog\nfrom trainprobe.metrics.analyze import LIMIT, RunLog\n"
        ),
    })  # fmt: skip
    assert relays(modules) == {("trainprobe.metrics.analyze", "RunLog"): ["trainprobe.cli.logs:2"]}
