"""Build hostile checkpoints from raw pickle opcodes and bytes, as an attacker would (no torch needed).

A payload never runs anything real: :func:`touch` is ``posix.system("touch SENTINEL")``, so if trainprobe's
rule ever broke, the sentinel file would exist and the test would say so.

Pickle pieces are bytes that push one value (``text("x")``, ``tensor(...)``, ``dict_of(...)``); a whole
pickle is :func:`pickle_of` (protocol 2, as ``torch.save`` writes, ending in STOP)."""

from __future__ import annotations

import importlib.util
import json
import struct
import warnings
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

# --- pickle opcodes ---------------------------------------------------------------------------------


def text(value: str) -> bytes:
    """BINUNICODE: push a str."""
    raw = value.encode("utf-8", "surrogatepass")
    return b"X" + len(raw).to_bytes(4, "little") + raw


def integer(value: int) -> bytes:
    """BININT / LONG1: push an int."""
    if -(1 << 31) <= value < 1 << 31:
        return b"J" + value.to_bytes(4, "little", signed=True)
    raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    if len(raw) < 256:
        return b"\x8a" + bytes([len(raw)]) + raw
    return b"\x8b" + len(raw).to_bytes(4, "little") + raw


def floating(value: float) -> bytes:
    """BINFLOAT: push a float (inf and nan too)."""
    return b"G" + struct.pack(">d", value)


def glob(module: str, name: str) -> bytes:
    """GLOBAL (protocol 0-2 spelling, as torch.save writes): push module.name."""
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def tuple_of(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"


def list_of(*items: bytes) -> bytes:
    return b"](" + b"".join(items) + b"e" if items else b"]"


def dict_of(items: Iterable[tuple[bytes, bytes]] = ()) -> bytes:
    """EMPTY_DICT + SETITEMS of (pickled key, pickled value) pairs."""
    pairs = list(items)
    return b"}(" + b"".join(k + v for k, v in pairs) + b"u" if pairs else b"}"


def named(**items: bytes) -> bytes:
    """A dict with str keys."""
    return dict_of((text(k), v) for k, v in items.items())


def call(func: bytes, *args: bytes) -> bytes:
    """func(*args) by REDUCE."""
    return func + tuple_of(*args) + b"R"


def set_of(*items: bytes) -> bytes:
    """builtins.set([items]) by REDUCE, as protocol 2 writes a set."""
    return call(glob("builtins", "set"), list_of(*items))


def touch(sentinel: Path) -> bytes:
    """What a malicious checkpoint carries: os.system("touch SENTINEL") (never run by trainprobe)."""
    return call(glob("posix", "system"), text(f"touch {sentinel}"))


def pickle_of(value: bytes) -> bytes:
    """A whole protocol-2 pickle of one value."""
    return b"\x80\x02" + value + b"."


STORAGES = {
    "float32": "FloatStorage",
    "float16": "HalfStorage",
    "int64": "LongStorage",
    "uint8": "ByteStorage",
}


def tensor(
    key: str,
    size: tuple[int, ...],
    stride: tuple[int, ...] | None = None,
    *,
    numel: int | None = None,
    dtype: str = "float32",
    offset: int = 0,
) -> bytes:
    """torch._utils._rebuild_tensor_v2(storage data/KEY, offset, size, stride, False, OrderedDict()), the
    way torch.save pickles a tensor; the storage is a persistent id."""
    if stride is None:
        acc, strides = 1, []
        for d in reversed(size):
            strides.append(acc)
            acc *= d
        stride = tuple(reversed(strides))
    if numel is None:
        numel = 1
        for d in size:
            numel *= d
    storage = (
        tuple_of(text("storage"), glob("torch", STORAGES[dtype]), text(key), text("cpu"), integer(numel))
        + b"Q"
    )
    return call(
        glob("torch._utils", "_rebuild_tensor_v2"),
        storage,
        integer(offset),
        tuple_of(*(integer(d) for d in size)),
        tuple_of(*(integer(s) for s in stride)),
        b"\x89",
        call(glob("collections", "OrderedDict"), b")"),
    )


# --- containers -----------------------------------------------------------------------------------------


def torch_zip(path: Path, data_pkl: bytes, storages: dict[str, bytes] | None = None) -> Path:
    """A zip archive laid out as torch.save writes it: archive/data.pkl, byteorder, data/KEY, version."""
    records = [("archive/data.pkl", data_pkl), ("archive/byteorder", b"little")]
    records += [(f"archive/data/{key}", raw) for key, raw in (storages or {}).items()]
    records.append(("archive/version", b"3\n"))
    return write_zip(path, records)


def write_zip(path: Path, records: list[tuple[str, bytes]], *, compress: int = zipfile.ZIP_STORED) -> Path:
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as zf:
        warnings.simplefilter("ignore")  # "Duplicate name": the point of some cases
        for name, data in records:
            info = zipfile.ZipInfo(name)
            info.compress_type = compress
            zf.writestr(info, data)
    return path


@dataclass(frozen=True)
class RawRecord:
    """A zip record written byte by byte: ``data`` as stored (already compressed when ``method`` is 8),
    with the sizes, CRC32 and flags its headers claim."""

    name: str
    data: bytes
    size: int
    crc: int = 0
    method: int = zipfile.ZIP_STORED
    flags: int = 0


def raw_zip(path: Path, records: list[RawRecord]) -> Path:
    """A zip archive whose headers say exactly what the records claim (sizes below 4 GiB; a zip64 end record
    when there are more than 65,535 records)."""
    out = bytearray()
    central = bytearray()
    for r in records:
        name = r.name.encode()
        offset = len(out)
        out += struct.pack(
            "<4sHHHHHIIIHH",
            b"PK\x03\x04",
            20,
            r.flags,
            r.method,
            0,
            0,
            r.crc,
            len(r.data),
            r.size,
            len(name),
            0,
        )
        out += name + r.data
        central += struct.pack(
            "<4sHHHHHHIIIHHHHHII",
            b"PK\x01\x02",
            20,
            20,
            r.flags,
            r.method,
            0,
            0,
            r.crc,
            len(r.data),
            r.size,
            len(name),
            0,
            0,
            0,
            0,
            0,
            offset,
        )
        central += name
    count, tail = len(records), b""
    if count > 0xFFFF:  # zip64: the count only fits the zip64 end record
        at = len(out) + len(central)
        tail = struct.pack(
            "<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, len(central), len(out)
        ) + struct.pack("<4sIQI", b"PK\x06\x07", 0, at, 1)
        count = 0xFFFF
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, len(central), len(out), 0)
    path.write_bytes(bytes(out + central + tail + end))
    return path


def safetensors(path: Path, header: dict[str, object] | bytes, data: bytes = b"") -> Path:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def f32(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


NAN = float("nan")


# --- what a case expects --------------------------------------------------------------------------------

COMMANDS = ("scan", "check", "diff", "triage")


@dataclass(frozen=True)
class Case:
    """What the commands must do on a case: each one's exit code, words scan must print, the globals it
    must name; the time and memory every command must stay within. ``diff`` compares the file with itself."""

    scan: int
    check: int
    triage: int
    diff: int | None = None  # None: scan's (diff judges each unit as scan does: one answer)
    says: str = ""  # in scan's output (stdout and stderr)
    globals: tuple[str, ...] = ()  # suspicious globals scan must name
    seconds: float = 30.0  # CPU seconds per command, start-up included (a busy machine does not stretch it)
    max_rss_mb: float = 400.0
    # The data a command must hold beyond the file's bytes, where the format makes it build more (say why in
    # ``notes["kept"]``): peak RSS is held to the command's baseline + 2 x (file bytes + this).
    kept_mb: float = 0.0
    notes: dict[str, str] = field(default_factory=dict)

    def exit_code(self, command: str) -> int:
        code: int | None = getattr(self, command)
        return self.scan if code is None else code


#: the hostile cases, one file each (``CASE`` and ``build(folder, sentinel)``)
CASES_DIR = Path(__file__).parent / "cases"


def load_case(path: Path) -> ModuleType:
    """One case file as a module, its ``CASE`` checked."""
    spec = importlib.util.spec_from_file_location(f"hostile_case_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert isinstance(module.CASE, Case), f"{path.name}: CASE must be a hostile.craft.Case"
    return module


def build_cases(folder: Path) -> list[Path]:
    """Every case's hostile file, built in a folder of its own under ``folder``, its sentinel beside it."""
    paths = []
    for case_file in sorted(CASES_DIR.glob("*.py")):
        where = folder / case_file.stem
        where.mkdir()
        paths.append(Path(load_case(case_file).build(where, where / "pwned")))
    return paths
