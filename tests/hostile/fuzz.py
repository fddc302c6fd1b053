"""A mutation fuzzer over trainprobe's checkpoint readers: seeded, bounded, reproducible.

Each case takes a real checkpoint (a *seed*), applies one to three mutations chosen by a seeded random
generator, writes the result and runs trainprobe command lines on it in a worker process
(:mod:`hostile.fuzz_worker`) under a 2 GiB address-space limit. A case fails when a command exits with a code
other than 0, 1 or 2, prints a traceback, takes longer than the time limit or grows the worker's peak memory
by more than the memory limit. Case ``n`` of a seed is always the same bytes (from
``random.Random(f"{seed}:{n}")``), so a failure is reproduced by its number alone.

Mutations work on bytes (bit flips, interesting integers written over 1, 2, 4 or 8 bytes, cuts, repeats,
inserts, truncation) and, where a format has an inner structure a byte flip would only break, on that
structure: the opcodes of a zip archive's ``data.pkl`` (the archive is rebuilt with valid CRCs so the
unpickler sees the change), the tokens of a JSON header (the length prefix kept right)."""

from __future__ import annotations

import io
import json
import os
import pickletools
import random
import re
import shutil
import struct
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]

INTERESTING_INTS = (0, 1, -1, 2, 7, 8, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
                    2**62, 2**63 - 1, 2**63, 2**64 - 1, 10**15, -(2**31), -(2**63))  # fmt: skip
INTERESTING_JSON = (b"-1", b"0", b"1.5", b"1e309", b"-1e309", b"18446744073709551616", b"9" * 400, b"NaN",
                    b"Infinity", b'"F32"', b'"x"', b"[]", b"{}", b"null", b"true", b"[[[[[[[[1]]]]]]]]",
                    b"[0, 0]", b"[4, 0]", b'{"dtype": "F32"}')  # fmt: skip


# --- byte mutations -------------------------------------------------------------------------------------


def _flip(rng: random.Random, data: bytearray) -> str:
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(data))
        data[at] ^= 1 << rng.randrange(8)
    return "bit flips"


def _interesting(rng: random.Random, data: bytearray) -> str:
    width = rng.choice((1, 2, 4, 8))
    if len(data) < width:
        return "nothing"
    at = rng.randrange(len(data) - width + 1)
    value = rng.choice(INTERESTING_INTS) % (1 << (8 * width))
    data[at : at + width] = value.to_bytes(width, rng.choice(("little", "big")))
    return f"int {value:#x} at {at}"


def _cut(rng: random.Random, data: bytearray) -> str:
    at = rng.randrange(len(data))
    n = rng.randint(1, max(1, min(len(data) - at, rng.choice((1, 8, 64, 4096)))))
    del data[at : at + n]
    return f"cut {n} at {at}"


def _repeat(rng: random.Random, data: bytearray) -> str:
    at = rng.randrange(len(data))
    n = rng.randint(1, max(1, min(len(data) - at, rng.choice((1, 8, 64, 1024)))))
    piece = bytes(data[at : at + n]) * rng.choice((1, 2, 16))
    where = rng.randrange(len(data) + 1)
    data[where:where] = piece
    return f"repeat {n} from {at} at {where}"


def _insert(rng: random.Random, data: bytearray) -> str:
    where = rng.randrange(len(data) + 1)
    data[where:where] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return f"insert at {where}"


def _truncate(rng: random.Random, data: bytearray) -> str:
    at = rng.randrange(len(data))
    del data[at:]
    return f"truncate at {at}"


BYTE_MUTATIONS: tuple[Callable[[random.Random, bytearray], str], ...] = (
    _flip, _interesting, _interesting, _cut, _repeat, _insert, _truncate,
)  # fmt: skip


def mutate_bytes(rng: random.Random, raw: bytes) -> tuple[bytes, list[str]]:
    data = bytearray(raw)
    done = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        if not data:
            break
        done.append(rng.choice(BYTE_MUTATIONS)(rng, data))
    return bytes(data), done


# --- structure-aware mutations ----------------------------------------------------------------------------


def mutate_pickle(rng: random.Random, raw: bytes) -> tuple[bytes, list[str]]:
    """Change one opcode's argument or the opcodes themselves (drop, repeat, swap one for another)."""
    try:
        ops = [(op, arg, pos) for op, arg, pos in pickletools.genops(raw)]
    except Exception:  # already broken by an earlier mutation: fall back to bytes
        return mutate_bytes(rng, raw)
    if not ops:
        return mutate_bytes(rng, raw)
    i = rng.randrange(len(ops))
    op, arg, pos = ops[i]
    end = ops[i + 1][2] if i + 1 < len(ops) else len(raw)
    choice = rng.randrange(5)
    if choice == 0 and isinstance(arg, int) and end - pos > 1:
        width = end - pos - 1
        value = rng.choice(INTERESTING_INTS) % (1 << (8 * min(width, 8)))
        body = value.to_bytes(min(width, 8), "little") + raw[pos + 1 + min(width, 8) : end]
        return raw[: pos + 1] + body + raw[end:], [f"{op.name} argument {value:#x} at {pos}"]
    if choice == 1:
        return raw[:pos] + raw[end:], [f"drop {op.name} at {pos}"]
    if choice == 2:
        return raw[:end] + raw[pos:end] * rng.choice((1, 2, 100)) + raw[end:], [f"repeat {op.name} at {pos}"]
    if choice == 3:
        other = rng.choice(pickletools.opcodes)
        code = other.code.encode("latin-1")
        return raw[:pos] + code + raw[pos + 1 :], [f"{op.name} at {pos} becomes {other.name}"]
    return mutate_bytes(rng, raw)


_JSON_TOKEN = re.compile(rb'-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|"(?:[^"\\]|\\.)*"|\[|\{')


def mutate_json(rng: random.Random, raw: bytes) -> tuple[bytes, list[str]]:
    """Replace one number, string or bracket with an interesting JSON value, or duplicate an entry."""
    tokens = list(_JSON_TOKEN.finditer(raw))
    if not tokens or rng.random() < 0.2:
        return mutate_bytes(rng, raw)
    token = rng.choice(tokens)
    if rng.random() < 0.15 and raw.startswith(b"{"):
        inner = raw[1:-1] if raw.endswith(b"}") else raw[1:]
        first = inner.split(b"},", 1)[0] + (b"}" if b"}," in inner else b"")
        return b"{" + first + b", " + inner + b"}", ["duplicate the first entry"]
    value = rng.choice(INTERESTING_JSON)
    return raw[: token.start()] + value + raw[token.end() :], [
        f"JSON {token.group()[:20]!r} -> {value[:20]!r}"
    ]


def rezip_pickle(rng: random.Random, raw: bytes) -> tuple[bytes, list[str]]:
    """A torch zip with its data.pkl's opcodes mutated, rebuilt with valid CRCs (else zipfile-level checks
    would be all a pickle mutation reached)."""
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            records = [(i.filename, zf.read(i)) for i in zf.infolist()]
    except Exception:
        return mutate_bytes(rng, raw)
    out = io.BytesIO()
    done: list[str] = []
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in records:
            if name.endswith("data.pkl"):
                data, done = mutate_pickle(rng, data)
            zf.writestr(zipfile.ZipInfo(name), data)
    return out.getvalue(), done


def resize_safetensors(rng: random.Random, raw: bytes) -> tuple[bytes, list[str]]:
    """A safetensors file with its JSON header mutated and the length prefix kept right."""
    if len(raw) < 8:
        return mutate_bytes(rng, raw)
    (n,) = struct.unpack("<Q", raw[:8])
    header, rest = raw[8 : 8 + n], raw[8 + n :]
    header, done = mutate_json(rng, header)
    return struct.pack("<Q", len(header)) + header + rest, done


# --- seeds and cases --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seed:
    """A real checkpoint (a file, or a directory with one file to mutate) and how to mutate it."""

    name: str
    path: Path
    mutators: tuple[Callable[[random.Random, bytes], tuple[bytes, list[str]]], ...]
    target: str = ""  # for a directory: the file inside it that is mutated


@dataclass
class Result:
    seed: str
    number: int
    command: str
    mutations: list[str]
    code: int | None
    crash: str | None = None
    seconds: float = 0.0
    grown_mb: float = 0.0
    hung: bool = False
    kept: Path | None = None

    @property
    def failed(self) -> bool:
        return self.hung or self.crash is not None or self.code not in (0, 1, 2)

    def describe(self) -> str:
        what = "hung" if self.hung else f"exit {self.code}" if self.crash is None else "traceback"
        return (
            f"{self.seed} #{self.number} ({', '.join(self.mutations)}) trainprobe {self.command}: {what} "
            f"after {self.seconds:.1f}s, +{self.grown_mb:.0f} MB; kept at {self.kept}\n{self.crash or ''}"
        )


def make_case(seed: Seed, number: int, root: Path) -> tuple[Path, list[str]]:
    """Write case ``number`` of ``seed`` under ``root``; (the path to give trainprobe, the mutations)."""
    rng = random.Random(f"{seed.name}:{number}")
    mutator = rng.choice(seed.mutators)
    if seed.target:
        case_dir = root / f"{seed.name}-{number}"
        shutil.copytree(seed.path, case_dir)
        victim = case_dir / seed.target
        data, done = mutator(rng, victim.read_bytes())
        victim.write_bytes(data)
        return case_dir, done
    data, done = mutator(rng, seed.path.read_bytes())
    path = root / f"{seed.name}-{number}{seed.path.suffix}"
    path.write_bytes(data)
    return path, done


def commands_for(number: int, path: Path, every: int) -> Iterator[tuple[str, list[str]]]:
    """scan for every case; check and diff (against itself) for one case in ``every``."""
    yield "scan", ["scan", "--json", str(path)]
    if number % every == 0:
        yield "check", ["check", str(path)]
    if number % every == every // 2:
        yield "diff", ["diff", str(path), str(path)]


class Worker:
    """One :mod:`hostile.fuzz_worker` process; replaced when a case outlives its time limit."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": f"{TESTS_DIR}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        env["COLUMNS"] = "200"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hostile.fuzz_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        ready = self._reply(120.0)
        if ready is None or not ready.get("ready"):
            raise RuntimeError("the fuzz worker did not start")

    def _reply(self, timeout: float) -> dict[str, object] | None:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not box or not box[0]:
            return None
        reply: dict[str, object] = json.loads(box[0])
        return reply

    def run(self, argv: list[str], timeout: float) -> dict[str, object] | None:
        """The worker's reply, or None when it hung or died (it is then killed: make a new Worker)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"id": 0, "argv": argv}) + "\n")
            self.proc.stdin.flush()
        except OSError:
            return None
        reply = self._reply(timeout)
        if reply is None:
            self.close()
        return reply

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@dataclass
class Campaign:
    """Cases ``start .. start+count`` of every seed, ``workers`` at a time."""

    seeds: list[Seed]
    count: int
    root: Path
    start: int = 0
    workers: int = 2
    timeout: float = 20.0
    max_grown_mb: float = 600.0
    check_every: int = 4
    results: list[Result] = field(default_factory=list)
    cases_run: int = 0
    seconds: float = 0.0

    def run(self) -> list[Result]:
        """Every failing result (kept files under ``root/failed``)."""
        jobs = [(seed, n) for n in range(self.start, self.start + self.count) for seed in self.seeds]
        lock = threading.Lock()
        started = time.perf_counter()

        def lane(index: int) -> None:
            worker = Worker()
            scratch = self.root / f"lane{index}"
            scratch.mkdir(parents=True, exist_ok=True)
            try:
                while True:
                    with lock:
                        if not jobs:
                            return
                        seed, number = jobs.pop()
                    worker = self._one(worker, seed, number, scratch, lock)
            finally:
                worker.close()

        threads = [threading.Thread(target=lane, args=(i,)) for i in range(self.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.seconds = time.perf_counter() - started
        return [r for r in self.results if r.failed or r.grown_mb > self.max_grown_mb]

    def _one(self, worker: Worker, seed: Seed, number: int, scratch: Path, lock: threading.Lock) -> Worker:
        path, mutations = make_case(seed, number, scratch)
        try:
            for command, argv in commands_for(number, path, self.check_every):
                reply = worker.run(argv, self.timeout)
                result = Result(seed.name, number, command, mutations, None)
                if reply is None:
                    result.hung, result.seconds = True, self.timeout
                    worker = Worker()
                else:
                    result.code = reply["code"]  # type: ignore[assignment]
                    result.crash = reply["crash"]  # type: ignore[assignment]
                    result.seconds = float(reply["seconds"])  # type: ignore[arg-type]
                    result.grown_mb = float(reply["grown_mb"])  # type: ignore[arg-type]
                if result.failed or result.grown_mb > self.max_grown_mb:
                    kept = self.root / "failed" / path.name
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    if not kept.exists():
                        (shutil.copytree if path.is_dir() else shutil.copy)(path, kept)
                    result.kept = kept
                with lock:
                    self.results.append(result)
                    self.cases_run += 1 if command == "scan" else 0
        finally:
            (shutil.rmtree if path.is_dir() else os.unlink)(path)
        return worker
