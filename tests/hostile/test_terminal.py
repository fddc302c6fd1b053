"""What reaches a terminal is inert: names from the data — a tensor name, a file name, a JSONL key — that
carry control sequences are shown escaped, never acted on.

Each case runs the real program on a pseudo-terminal (so the styled, rich-drawn path is the one taken) and
feeds what it wrote to a VT emulator (pyte): the window title is never set, no clipboard or other OSC
sequence and no BEL is written, no line of the screen is a verdict the data forged, and the finding the
data tried to hide is on the screen."""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyte
import pytest

from hostile.craft import NAN, f32, safetensors

COLUMNS, ROWS = 160, 400

#: an attack on the reader of the output: set the window title, write the clipboard (OSC 52), then go to the
#: start of the line, erase it, print a clean verdict and move up over the real one
FORGERY = "\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07\r\x1b[2K\u2713 clean\x1b[1A\x1b[2K"
#: a name that prints a line of its own, and one that reverses what follows it
NEWLINE_VERDICT = "\n\u2713 clean: no NaN/Inf\n"
BIDI = "\u202etp.exe"


def nan_safetensors(folder: Path, tensor_name: str, file_name: str = "model.safetensors") -> Path:
    header = {tensor_name: {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    return safetensors(folder / file_name, header, f32(NAN, 1.0))


def nan_jsonl(folder: Path, key: str) -> Path:
    path = folder / "train.jsonl"
    rows = [{"step": s, key: (float("nan") if s == 8 else 1.0 / s)} for s in range(1, 12)]
    path.write_text("".join(json.dumps(r, allow_nan=True) + "\n" for r in rows))
    return path


@dataclass(frozen=True)
class TerminalCase:
    build: Callable[[Path], Path]
    argv: Callable[[Path, Path], list[str]]  # (the file, its folder) -> the command's words
    shows: str  # a word of the finding that must be on the screen


def forged_tensor_name(folder: Path) -> Path:
    return nan_safetensors(folder, "w" + FORGERY)


def forged_file_name(folder: Path) -> Path:
    name = "ok" + NEWLINE_VERDICT.replace("/", "_") + FORGERY + ".safetensors"
    return nan_safetensors(folder, "w", name)


def bidi_tensor_name(folder: Path) -> Path:
    return nan_safetensors(folder, "w" + BIDI)


def forged_jsonl_key(folder: Path) -> Path:
    return nan_jsonl(folder, "loss" + FORGERY)


def _cases() -> dict[str, TerminalCase]:
    cases = {}
    builders = {
        "tensor-name": forged_tensor_name,
        "file-name": forged_file_name,
        "bidi-name": bidi_tensor_name,
    }
    for label, build in builders.items():
        cases[f"scan-{label}"] = TerminalCase(build, lambda f, d: ["scan", str(f)], "NaN")
        cases[f"check-{label}"] = TerminalCase(build, lambda f, d: ["check", str(f)], "NaN")
        cases[f"diff-{label}"] = TerminalCase(build, lambda f, d: ["diff", str(f), str(f)], "NaN")
        cases[f"triage-{label}"] = TerminalCase(build, lambda f, d: ["triage", str(d)], "NaN")
    cases["logs-jsonl-key"] = TerminalCase(forged_jsonl_key, lambda f, d: ["logs", str(f)], "NaN")
    return cases


CASES = _cases()


def run_on_terminal(argv: list[str], timeout: float = 60.0) -> tuple[int, bytes]:
    """The program on a pseudo-terminal of COLUMNS x ROWS; its exit code and every byte it wrote."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS)}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "trainprobe", *argv], stdin=slave, stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the program and every child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    return code, bytes(out)


@pytest.mark.parametrize("name", CASES)
def test_names_from_the_data_cannot_act_on_the_terminal(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    folder = tmp_path / "run"
    folder.mkdir()
    target = case.build(folder)
    code, raw = run_on_terminal(case.argv(target, folder))

    screen = pyte.Screen(COLUMNS, ROWS)
    stream = pyte.ByteStream(screen)
    stream.feed(raw)
    lines = [line.rstrip() for line in screen.display]
    shown = "\n".join(line for line in lines if line)

    assert b"Traceback" not in raw, shown
    assert code not in (0, 3), f"exit {code}: a NaN must be a finding\n{shown}"
    assert screen.title == "", f"the window title was set to {screen.title!r}"
    assert b"\x1b]" not in raw, "an OSC sequence (title, clipboard) reached the terminal"
    assert b"\x07" not in raw, "a BEL reached the terminal"
    assert "\u202e" not in raw.decode("utf-8", "replace"), "a bidi override reached the terminal"
    forged = [line for line in lines if line.lstrip().startswith("\u2713 clean")]
    assert not forged, f"a line the data forged is on the screen: {forged}\n{shown}"
    assert case.shows in shown, shown
    assert "\\x1b" in shown or "\\n" in shown or "\\u202e" in shown, f"the name is not shown escaped\n{shown}"
