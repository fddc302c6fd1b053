"""Registries as tables of "module:Class" rows: what each loads, and that the loader travels to the far
side."""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType

import pytest

from trainprobe import plugins
from trainprobe.checkpoint.check import optimizers
from trainprobe.checkpoint.check.optimizers import OPTIMIZERS
from trainprobe.checkpoint.reading import formats
from trainprobe.checkpoint.reading.formats import FORMATS
from trainprobe.checkpoint.units import frameworks
from trainprobe.checkpoint.units.frameworks import FRAMEWORKS, FrameworkBase
from trainprobe.metrics import readers
from trainprobe.metrics.readers import DIR_READERS, READERS
from trainprobe.remote.shipping import modules_named


def test_a_row_names_a_class_under_its_package() -> None:
    cls = plugins.class_named("trainprobe.metrics.readers", "csv:CsvReader")
    assert cls.__name__ == "CsvReader"
    assert cls.__module__ == "trainprobe.metrics.readers.csv"


def test_instances_keep_the_rows_order() -> None:
    rows = ("folder:PlainFile", "dcp:Dcp")
    assert [f.name for f in plugins.instances(frameworks.__name__, rows)] == ["file", "dcp"]


def test_a_row_that_names_nothing_fails_loudly() -> None:
    with pytest.raises(AttributeError):
        plugins.class_named("trainprobe.metrics.readers", "csv:NoSuchReader")
    with pytest.raises(ModuleNotFoundError):
        plugins.class_named("trainprobe.metrics.readers", "no_such_module:X")


def _classes_defined(package: ModuleType, is_piece: Callable[[type], bool]) -> set[str]:
    """Every class defined in a public module of ``package`` that ``is_piece``, as "module:Class"."""
    found = set()
    for path in Path(str(package.__file__)).parent.glob("*.py"):
        if path.stem.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{path.stem}")
        for name, obj in vars(module).items():
            defined_here = isinstance(obj, type) and obj.__module__ == module.__name__
            if defined_here and not name.startswith("_") and not inspect.isabstract(obj) and is_piece(obj):
                found.add(f"{path.stem}:{name}")
    return found


def _rows_of(registry: Iterable[object]) -> set[str]:
    return {f"{type(p).__module__.rsplit('.', 1)[1]}:{type(p).__name__}" for p in registry}


def _named_with(*methods: str) -> Callable[[type], bool]:
    """A piece: a class that defines its ``name`` and the registry's methods itself."""
    return lambda cls: all(m in vars(cls) for m in ("name", *methods))


# one new file and its row: a piece written but left out of its registry's rows would never be asked
@pytest.mark.parametrize(
    ("package", "registry", "is_piece"),
    [
        (frameworks, FRAMEWORKS, lambda cls: issubclass(cls, FrameworkBase) and "name" in vars(cls)),
        (formats, FORMATS, _named_with("sniff", "open")),
        (optimizers, OPTIMIZERS, _named_with("matches")),
    ],
    ids=["frameworks", "formats", "optimizers"],
)
def test_every_piece_is_registered(
    package: ModuleType, registry: Iterable[object], is_piece: Callable[[type], bool]
) -> None:
    assert _classes_defined(package, is_piece) == _rows_of(registry)


def test_every_reader_module_is_registered() -> None:
    modules = {p.stem for p in Path(inspect.getfile(readers)).parent.glob("*.py")}
    registered = {type(r).__module__.rsplit(".", 1)[1] for r in (*READERS, *DIR_READERS)}
    helpers = {"__init__", "base"} | {m for m in modules if m.startswith("_")}
    # a module without a registered reader is a helper the readers share (none is named like a format)
    unregistered = modules - registered - helpers
    for name in unregistered:
        source = (Path(inspect.getfile(readers)).parent / f"{name}.py").read_text(encoding="utf-8")
        tree = ast.parse(source)
        defines_reader = any(
            isinstance(n, ast.FunctionDef) and n.name in ("sniff", "claims") for n in ast.walk(tree)
        )
        assert not defines_reader, f"readers/{name}.py defines a reader that no row registers"


@pytest.mark.parametrize(
    ("command", "tables"),
    [
        ("logs", (plugins.LOG_READERS, plugins.RUN_DIR_READERS)),
        ("scan", (plugins.CHECKPOINT_FORMATS,)),
        ("check", (plugins.FRAMEWORKS, plugins.OPTIMIZER_FAMILIES)),
    ],
)
def test_the_help_lists_every_registered_piece(
    command: str, tables: tuple[dict[str, str], ...], capsys: pytest.CaptureFixture[str]
) -> None:
    from trainprobe.cli import main

    assert main([command, "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())  # the help wraps lines
    for table in tables:
        for what in filter(None, table.values()):
            assert " ".join(what.split()) in shown


def test_help_list_reads_like_a_sentence() -> None:
    assert plugins.help_list({"a:A": "one", "b:B": "", "c:C": "two", "d:D": "three"}) == "one, two and three"
    assert plugins.help_list({"a:A": "one"}) == "one"


def test_stdlib_only_and_shipped_with_errors() -> None:
    tree = ast.parse(Path(plugins.__file__).read_bytes())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "importlib", "collections.abc", "typing"}
    assert not [
        n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and n.module != "__future__"
    ]
    for name in ("trainprobe.metrics", "trainprobe.checkpoint"):
        assert "trainprobe.plugins" in {m.name for m in modules_named([name])}
