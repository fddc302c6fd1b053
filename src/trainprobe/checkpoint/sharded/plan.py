"""Who reads which file of a unit read on several machines (``scan`` or ``check --on FLEET --sharded
PATH``). Pure: no file is read and nothing runs here (:mod:`trainprobe.tasks.sharded` runs the far-side calls
of :mod:`.inventory`, :mod:`.scan_share` and :mod:`.check_share`; :mod:`.merge` makes one report of the
reads).

**The same file or the same name?** Each target lists the files of PATH it has. Two entries of one name are
one file when they are the same inode on the same boot (storage several targets see: containers of one host,
bind mounts) or, across machines, when size, modification time and the CRC32 of the first and last 64 KiB
agree (a shared filesystem mounted under other device numbers; an exact copy). Anything else is another file
of the same name: a **conflict**, reported (corrupt), and the newest of them read.

**Who reads what.** A unit is built from the union of the names (its framework's layout, as a local scan
does). Each data file goes to one of its holders: files one target alone holds to it, then shared files,
largest first, to the holder with the fewest bytes so far. A one-file part is read whole where its file is;
a multi-file part (a DCP directory, an HF index) is read in shares — each holder of some of its data files
reads those, given the part's ``.metadata`` or index. A data file the part names that no target holds is
**missing**, and said as a local scan says it.

**One report** (:mod:`.merge`): the shares of a part merge into one read and the unit is judged from its
reads exactly as a local scan judges it, so the report equals the scan of all the files in one place — plus
who read which file, and the files a failed target should have read, reported as not read.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainprobe.checkpoint.reading.parts import data_files
from trainprobe.checkpoint.sharded.inventory import EDGE_BYTES
from trainprobe.checkpoint.units.discover import Unit, sort_parts
from trainprobe.checkpoint.units.frameworks import FRAMEWORKS, Part, role_by_name
from trainprobe.errors import UsageError


@dataclass(frozen=True)
class Held:
    """One file as one target has it."""

    target: str
    rel: str
    size: int
    mtime_ns: int
    where: tuple[str, int, int]  # (boot, device, inode)
    crc: int
    readable: bool
    content: bytes | None = None
    global_step: int | None = None

    def same_file(self, other: Held) -> bool:
        """One file, or copies of it: the same inode; the same bytes (a small file's content, which every
        target sends, or a size and edge CRC that cover the whole file); or the same size, mtime and edge
        CRC. A copy's mtime may differ (a copy that did not keep it, a clock that rounds): bytes decide."""
        if self.where == other.where:
            return True
        if self.content is not None and other.content is not None:
            return self.content == other.content
        if (self.size, self.crc) != (other.size, other.crc):
            return False
        return self.size <= 2 * EDGE_BYTES or self.mtime_ns == other.mtime_ns


@dataclass
class ShardPlan:
    """Who reads what of the unit at ``path``: ``unit`` (built from every target's names), ``holders`` and
    ``reader`` of each file (relative to ``path``), the data files no target holds (``missing``), names two
    targets hold as different files (``conflicts``), and each target's ``requests`` for
    :func:`trainprobe.checkpoint.sharded.scan_share.scan_share`."""

    path: str
    unit: Unit
    holders: dict[str, list[Held]] = field(default_factory=dict)
    reader: dict[str, str] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)  # part path -> its data files nobody holds
    conflicts: list[str] = field(default_factory=list)
    requests: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    trainer_state: int | None = None

    def bytes_of(self, target: str) -> int:
        return sum(self.holders[rel][0].size for rel, t in self.reader.items() if t == target)

    def files_of(self, target: str) -> list[str]:
        return sorted(rel for rel, t in self.reader.items() if t == target)


class _Listing:
    """The union of the targets' files, as :func:`~trainprobe.checkpoint.units.discover.sort_parts` asks
    about them."""

    def __init__(self, path: str, held: Mapping[str, list[Held]]) -> None:
        self.path = path
        self.held = held
        self.dirs = {os.path.normpath(path)} | {
            os.path.normpath(os.path.join(path, rel.split(os.sep, 1)[0])) for rel in held if os.sep in rel
        }

    def _first(self, path: str) -> Held | None:
        entries = self.held.get(os.path.relpath(path, self.path))
        return entries[0] if entries else None

    def isdir(self, path: str) -> bool:
        return os.path.normpath(path) in self.dirs

    def size(self, path: str) -> int:
        first = self._first(path)
        return first.size if first else 0

    def readable(self, path: str) -> bool:
        first = self._first(path)
        return bool(first and first.readable)

    def index_bytes(self, path: str) -> bytes | None:
        first = self._first(path)
        return first.content if first else None


def _held(inventories: Mapping[str, dict[str, Any]]) -> tuple[dict[str, list[Held]], list[str]]:
    """Every name's holders (one file each), and the conflicts."""
    held: dict[str, list[Held]] = {}
    conflicts: list[str] = []
    for target, inv in inventories.items():
        for e in inv.get("files", []):
            content = base64.b64decode(e["content"]) if e.get("content") else None
            h = Held(
                target, e["rel"], int(e["size"]), int(e["mtime_ns"]), (str(inv.get("boot")), int(e["dev"]),
                int(e["ino"])), int(e["crc"]), bool(e["readable"]), content, e.get("global_step"),
            )  # fmt: skip
            others = held.setdefault(h.rel, [])
            if others and not others[0].same_file(h):
                # A copy left from an earlier save is the older one: read the newest.
                keep = h if h.mtime_ns > others[0].mtime_ns else others[0]
                conflicts.append(
                    f"{h.rel}: {others[0].target} and {target} hold different files of that name (size "
                    f"{others[0].size:,} and {h.size:,}, or other contents): read the newer, {keep.target}'s"
                )
                if keep is h:
                    others[:] = [h]
                continue
            others.append(h)
    return held, conflicts


def _unit(path: str, held: Mapping[str, list[Held]]) -> Unit:
    """The unit ``path`` is, from the names alone, as a local discovery would find it."""
    top = sorted(rel for rel in held if os.sep not in rel)
    dirs = sorted({rel.split(os.sep, 1)[0] for rel in held if os.sep in rel})
    files = [f for f in top if not f.startswith(".") or f == ".metadata"]
    for fw in FRAMEWORKS:
        try:
            layout = fw.layout(path, files, dirs)
        except OSError:  # a layout that looks into sub-folders here: they are not here
            layout = None
        if layout is not None:
            unit = sort_parts(Unit(path, layout.framework, list(layout.parts)), _Listing(path, held))
            if unit.parts or unit.unread:
                return unit
    # No framework's folder: one checkpoint file in it (an HF index, which covers its shards), as a local
    # scan of the folder finds it.
    loose = sort_parts(
        Unit(path, "file", [Part(os.path.join(path, f), role_by_name(f)) for f in files]),
        _Listing(path, held),
    )
    if len(loose.parts) == 1 and not loose.unread:
        return Unit(loose.parts[0].path, "file", [Part(loose.parts[0].path, "state")])
    raise UsageError(
        f"{path}: the targets' files make no checkpoint unit (saw {', '.join(top[:6]) or 'no files'})",
        hint="--sharded takes one unit: a DCP directory, a DeepSpeed global_stepN/, an HF checkpoint-N/ or "
        "sharded model folder",
    )


@dataclass(frozen=True)
class PartFiles:
    """A part's data files relative to the unit (``files``), the folder they are named from (``folder``,
    relative to the unit: a DCP directory, an index's folder) and the part's description (``.metadata`` or
    index bytes; None for a one-file part, which is its own data file)."""

    files: list[str]
    folder: str = ""
    description: bytes | None = None

    def named_in_part(self, rels: Sequence[str]) -> list[str]:
        return [os.path.relpath(r, self.folder) if self.folder else r for r in rels]


def part_files(part: Part, path: str, held: Mapping[str, list[Held]]) -> PartFiles:
    rel = os.path.normpath(os.path.relpath(part.path, path))
    rel = "" if rel == "." else rel
    index, folder = (
        (rel, os.path.dirname(rel)) if rel.endswith(".index.json") else (os.path.join(rel, ".metadata"), rel)
    )
    description = (
        held[index][0].content if index in held and (rel.endswith(".index.json") or rel not in held) else None
    )
    described = data_files(part.path, description=description) if description is not None else None
    if described is None:
        return PartFiles([rel])
    return PartFiles([os.path.join(folder, f) for f in described.files], folder, description)


def plan_shards(path: str, inventories: Mapping[str, dict[str, Any]], *, whole: bool = False) -> ShardPlan:
    """Who reads what (see the module doc); ``inventories``: each target's
    :func:`~.inventory.inventory` of ``path``. ``whole`` (check): a multi-file part goes
    whole to one target where one holds all its data files (its checks relate tensors of different data
    files), split only where none does."""
    held, conflicts = _held(inventories)
    plan = ShardPlan(path, _unit(path, held), conflicts=conflicts)
    plan.holders = held
    plan.trainer_state = next(
        (h[0].global_step for rel, h in held.items() if rel == "trainer_state.json"), None
    )
    parts = [(part, part_files(part, path, held)) for part in plan.unit.parts]
    load = dict.fromkeys(inventories, 0)
    if whole:
        described = [pf for _p, pf in parts if pf.description is not None]
        for pf in sorted(described, key=lambda pf: -sum(held[r][0].size for r in pf.files if r in held)):
            here = [r for r in pf.files if r in held]
            everywhere = set(inventories).intersection(*({h.target for h in held[r]} for r in here))
            if here and everywhere:
                target = min(everywhere, key=lambda t: (load[t], list(load).index(t)))
                for rel in here:
                    plan.reader[rel] = target
                    load[target] += held[rel][0].size
    wanted = [rel for _p, pf in parts for rel in pf.files if rel in held and rel not in plan.reader]
    for rel in sorted(wanted, key=lambda r: (len(held[r]) > 1, -held[r][0].size, r)):
        target = min((h.target for h in held[rel]), key=lambda t: (load[t], list(load).index(t)))
        plan.reader[rel] = target
        load[target] += held[rel][0].size
    for part, pf in parts:
        absent = [f for f in pf.files if f not in held]
        if absent:
            plan.missing[part.path] = absent
        description = base64.b64encode(pf.description).decode("ascii") if pf.description is not None else None
        by_target: dict[str, list[str]] = {}
        for rel in pf.files:
            if rel in plan.reader:
                by_target.setdefault(plan.reader[rel], []).append(rel)
        for target, rels in by_target.items():
            plan.requests.setdefault(target, []).append(
                {
                    "part": part.path,
                    "role": part.role,
                    "unit": path,
                    "framework": plan.unit.framework,
                    "files": pf.named_in_part(rels) if description is not None else None,
                    "description": description,
                }
            )
    return plan
