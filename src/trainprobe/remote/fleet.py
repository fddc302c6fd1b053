"""Fleets: many targets named on one command line, expanded by pure functions.

A fleet spec is one of

- a target string, ``ssh=gpu07//docker=trainer``;
- a target string with host ranges, ``ssh=node[01-16]//docker=trainer`` or ``ssh=node[1-3,7]``: each ``[...]``
  holding numbers, ``a-b`` ranges and commas expands in place (a leading zero pads to the width written),
  several
  ranges multiply; brackets holding anything else (an IPv6 address, ``ssh=[::1]``) stay as they are;
- a name from the ``[targets]`` table or a group from the ``[groups]`` table of the targets file.

The targets file is ``$TRAINPROBE_CONFIG`` when set, else ``$XDG_CONFIG_HOME/trainprobe/targets.toml`` (XDG's
default: ``~/.config/trainprobe/targets.toml``)::

    [targets]
    gpu1 = "ssh=root@10.1.2.6//pct=200//venv=/root/venv"

    [groups]
    trainers = ["ssh=node[01-16]//docker=trainer", "gpu1"]
    everything = ["trainers", "ssh=login1"]

A group lists specs (names, other groups, ranges). Expansion keeps the order given and drops repeats,
comparing the
canonical target strings. ``slurm=JOBID`` without a node stays one target here; the fan-out asks Slurm for
the job's
nodes when it runs (:func:`trainprobe.remote.fanout.expand_slurm_jobs`).
"""

from __future__ import annotations

import importlib
import itertools
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from trainprobe.errors import UsageError
from trainprobe.remote._record import field, record
from trainprobe.remote.target import Target, parse_target

TYPE_CHECKING = False  # no typing at run time: a single `trainprobe run` expands its target through here
if TYPE_CHECKING:
    from typing import Any

#: the most targets one spec may expand to; a typo like node[1-100000] should fail, not hang
MAX_EXPANSION = 10_000
#: a host range ``[01-16,20]`` and a name in the targets file; patterns, not compiled at import (re compiles
#: and caches them on first use): every ``trainprobe run`` imports this module, few use a range
RANGE = r"\[(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)\]"
NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the targets file is looked for: ``$TRAINPROBE_CONFIG``, else the XDG config location."""
    env = os.environ if env is None else env
    if env.get("TRAINPROBE_CONFIG"):
        return Path(env["TRAINPROBE_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "trainprobe" / "targets.toml"


@record(frozen=True)
class FleetConfig:
    """The named targets and groups of a targets file."""

    targets: Mapping[str, str] = field(default_factory=dict)
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    path: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str | None = None) -> FleetConfig:
        where = path or "targets file"
        unknown = sorted(set(data) - {"targets", "groups"})
        if unknown:
            raise UsageError(f"{where}: unknown table {unknown[0]!r} (the file has [targets] and [groups])")
        targets: dict[str, str] = {}
        for name, value in dict(data.get("targets", {})).items():
            _check_name(name, where)
            if not isinstance(value, str):
                raise UsageError(f'{where}: targets.{name} must be a target string, e.g. "ssh=host//venv=/v"')
            targets[name] = value
        groups: dict[str, tuple[str, ...]] = {}
        for name, value in dict(data.get("groups", {})).items():
            _check_name(name, where)
            members = [value] if isinstance(value, str) else value
            if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
                raise UsageError(f"{where}: groups.{name} must be a list of target strings or names")
            if name in targets:
                raise UsageError(f"{where}: {name!r} is both a target and a group")
            groups[name] = tuple(members)
        return cls(targets=targets, groups=groups, path=path)

    def names(self) -> list[str]:
        return sorted([*self.targets, *self.groups])


def _check_name(name: str, where: str) -> None:
    if not re.fullmatch(NAME, name):
        raise UsageError(f"{where}: {name!r} is not a usable name (letters, digits, '_', '.', '-')")


def _toml_loads(text: str, where: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib

        loads = tomllib.loads
        error: type[Exception] = tomllib.TOMLDecodeError
    else:  # pragma: no cover - Python 3.10 without tomllib
        try:
            tomli = importlib.import_module("tomli")
        except ImportError:
            raise UsageError(
                f"{where}: reading a targets file needs Python 3.11 or newer", hint="or: pip install tomli"
            ) from None
        loads, error = tomli.loads, tomli.TOMLDecodeError
    try:
        return dict(loads(text))
    except error as exc:
        raise UsageError(f"{where}: not valid TOML: {exc}") from None


def load_config(path: str | os.PathLike[str] | None = None) -> FleetConfig:
    """Read the targets file. Without ``path``, a missing file at the default location is an empty config;
    a file named explicitly (``path`` or ``$TRAINPROBE_CONFIG``) must exist."""
    explicit = path is not None or bool(os.environ.get("TRAINPROBE_CONFIG"))
    where = Path(path) if path is not None else config_path()
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError:
        if explicit:
            raise UsageError(f"targets file {where} does not exist") from None
        return FleetConfig(path=None)
    except OSError as exc:
        raise UsageError(f"cannot read targets file {where}: {exc.strerror}") from None
    return FleetConfig.from_dict(_toml_loads(text, str(where)), path=str(where))


def expand_range(body: str) -> list[str]:
    """``"01-03,7"`` → ``["01", "02", "03", "7"]``: each piece a number or ``a-b``, ``a`` fixing the width."""
    out: list[str] = []
    for piece in body.split(","):
        first, dash, last = piece.partition("-")
        if not dash:
            out.append(first)
            continue
        lo, hi = int(first), int(last)
        if hi < lo:
            raise UsageError(f"host range [{body}]: {piece} counts backwards")
        if hi - lo + len(out) >= MAX_EXPANSION:
            raise UsageError(f"host range [{body}] names more than {MAX_EXPANSION} hosts")
        width = len(first) if first.startswith("0") else 0
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out


def expand_ranges(spec: str) -> list[str]:
    """Every ``[...]`` range in ``spec`` expanded; several ranges give their product, first range slowest."""
    pieces = re.split(RANGE, spec) if "[" in spec else [spec]  # text, range body, text, ..., text
    if len(pieces) == 1:
        return [spec]
    texts, bodies = pieces[0::2], pieces[1::2]
    choices = [expand_range(body) for body in bodies]
    total = 1
    for choice in choices:
        total *= len(choice)
    if total > MAX_EXPANSION:
        raise UsageError(f"{spec!r} expands to {total} targets (more than {MAX_EXPANSION})")
    out = []
    for combo in itertools.product(*choices):
        out.append(texts[0] + "".join(value + text for value, text in zip(combo, texts[1:], strict=True)))
    return out


def _is_name(spec: str) -> bool:
    return "=" not in spec and "//" not in spec and re.fullmatch(NAME, spec) is not None


def _expand_one(spec: str, config: FleetConfig, stack: tuple[str, ...]) -> list[str]:
    spec = spec.strip()
    if not spec:
        raise UsageError(
            "an empty target in the list", hint="e.g. ssh=node[01-04] or a name from targets.toml"
        )
    if _is_name(spec) and (spec in config.targets or spec in config.groups):
        if spec in stack:
            cycle = " → ".join((*stack, spec))
            raise UsageError(f"{config.path or 'targets file'}: group {spec!r} contains itself ({cycle})")
        if spec in config.targets:
            return _expand_one(config.targets[spec], config, (*stack, spec))
        out: list[str] = []
        for member in config.groups[spec]:
            out.extend(_expand_one(member, config, (*stack, spec)))
        return out
    expanded = expand_ranges(spec)
    targets = []
    for text in expanded:
        try:
            targets.append(str(parse_target(text)))
        except UsageError:
            if _is_name(spec):
                known = ", ".join(config.names()) or "none"
                raise UsageError(
                    f"{spec!r} is neither a target string nor a name in {config.path or config_path()}",
                    hint=f"names there: {known}; a target looks like ssh=host or ssh=host//docker=trainer",
                ) from None
            raise
    return targets


def expand_targets(specs: Sequence[str], config: FleetConfig | None = None) -> list[str]:
    """The canonical target strings ``specs`` stand for, in order, each once.

    Raises UsageError (exit 2) for an unknown name, a bad range, a cycle among groups or a target that does
    not parse.
    """
    config = config or FleetConfig()
    seen: set[str] = set()
    out: list[str] = []
    for spec in specs:
        for target in _expand_one(spec, config, ()):
            if target not in seen:
                seen.add(target)
                out.append(target)
    if not out:
        raise UsageError("no targets given", hint="e.g. ssh=node[01-04]//docker=trainer")
    return out


def resolve(specs: Sequence[str], config: str | os.PathLike[str] | FleetConfig | None = None) -> list[Target]:
    """The targets ``specs`` name (target strings, host ranges, names and groups of the targets file), parsed,
    in order, each once: what every command's ``--on`` (and the MCP tools' ``target``) means.

    ``config`` is the targets file (a path, or one already loaded); None: ``$TRAINPROBE_CONFIG``, else the
    XDG location, where a missing file is an empty one. UsageError as :func:`expand_targets` raises it.
    """
    loaded = config if isinstance(config, FleetConfig) else load_config(config)
    return [parse_target(text) for text in expand_targets(specs, loaded)]
