"""Failures are tool results (isError) carrying the CLI's one sentence — never protocol errors or
tracebacks — and a tool that runs over its timeout is killed."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp_harness import McpSession, text_of

TRAINPROBE = [sys.executable, "-m", "trainprobe"]


def cli_error(*args: str) -> str:
    """The sentence the CLI prints after ``error:`` for the same mistake."""
    proc = subprocess.run(
        [*TRAINPROBE, *args], capture_output=True, text=True, env={**os.environ, "COLUMNS": "500"}
    )
    assert proc.returncode == 2, proc
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    return lines[0].removeprefix("error: ")


def assert_error(result: object, message: str) -> None:
    assert getattr(result, "is_error", False), result
    text = text_of(result)  # type: ignore[arg-type]
    assert text == message
    assert "Traceback" not in text


@pytest.mark.parametrize(
    ("tool", "arguments", "cli"),
    [
        ("triage", {"run_dir": "{tmp}/no-run"}, ["triage", "{tmp}/no-run"]),
        ("logs", {"paths": ["{tmp}/no.log"]}, ["logs", "{tmp}/no.log"]),
        ("diff", {"a": "{tmp}/a.pt", "b": "{tmp}/b.pt"}, ["diff", "{tmp}/a.pt", "{tmp}/b.pt"]),
    ],
)
def test_a_missing_path_is_the_clis_sentence(
    server: McpSession, tmp_path: Path, tool: str, arguments: dict[str, object], cli: list[str]
) -> None:
    def fill(value: object) -> object:
        if isinstance(value, list):
            return [fill(v) for v in value]
        return str(value).replace("{tmp}", str(tmp_path))

    result = server.call(tool, {k: fill(v) for k, v in arguments.items()})
    assert_error(result, cli_error(*(str(fill(word)) for word in cli)))
    assert str(tmp_path) in text_of(result)


def test_a_file_that_is_no_log_is_the_clis_sentence(server: McpSession, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("just some words\nand more of them\n")
    assert_error(server.call("logs", {"paths": [str(notes)]}), cli_error("logs", str(notes)))


def test_a_bad_target_string_names_the_valid_kinds(server: McpSession, checkpoints: Path) -> None:
    result = server.call("scan", {"paths": [str(checkpoints)], "target": "ssh=gpu07//dokcer=trainer"})
    assert_error(result, cli_error("probe", "ssh=gpu07//dokcer=trainer"))
    assert text_of(result).startswith(
        "ssh=gpu07//dokcer=trainer: unknown hop kind 'dokcer'; valid kinds: cd,"
    )


def test_an_unknown_target_name_is_an_error(server: McpSession) -> None:
    result = server.call("probe", {"target": "no-such-group"})
    assert result.is_error
    assert "no-such-group" in text_of(result)


def test_a_fleet_given_to_a_one_target_tool_says_what_to_do(server: McpSession, checkpoints: Path) -> None:
    result = server.call("check", {"paths": [str(checkpoints)], "target": "two-locals"})
    assert_error(
        result,
        "two-locals: names 2 targets, and check takes one — call it once per target (run and probe take "
        "fleets)",
    )


def test_an_unreachable_target_is_one_sentence(server: McpSession) -> None:
    result = server.call("scan", {"paths": ["/x"], "target": "ssh=127.0.0.1:1"})
    assert result.is_error
    assert text_of(result).startswith("ssh=127.0.0.1:1: unreachable: ")


def test_a_tool_that_runs_over_its_timeout_is_killed(server: McpSession, tmp_path: Path) -> None:
    big = tmp_path / "big.safetensors"  # a sparse 10 GB tensor of zeros: reading it takes well over 2 s
    n = 2_500_000_000
    head = json.dumps({"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
    with open(big, "wb") as fh:
        fh.write(struct.pack("<Q", len(head)) + head)
        fh.truncate(8 + len(head) + 4 * n)
    started = time.monotonic()
    result = server.call("scan", {"paths": [str(big)], "timeout_s": 2})
    assert_error(result, "timed out after 2 s; the far side was killed")
    assert time.monotonic() - started < 30


#: still running when its 2 s timeout kills it
OVERRUNNING_SCRIPT = "import time\nprint('started', flush=True)\ntime.sleep(60)"  # sleeps past the timeout


def test_a_script_that_runs_over_its_timeout_is_an_error_with_its_document(server: McpSession) -> None:
    result = server.call("run", {"script": OVERRUNNING_SCRIPT, "timeout_s": 2})
    assert result.is_error
    text = text_of(result)
    assert text.splitlines()[0] == "timed out after 2 s; the far side was killed"
    assert "stdout (8 bytes):\nstarted" in text
    assert result.structured_content["exit_code"] == 124
    assert result.structured_content["error"]["type"] == "RemoteTimeoutError"


def test_a_script_that_raises_is_an_error_with_the_remote_traceback_kept(server: McpSession) -> None:
    result = server.call("run", {"script": "def main():\n    return {}['rank0']\n"})
    assert result.is_error
    text = text_of(result)
    assert text.splitlines()[0] == "KeyError: 'rank0'"
    assert "KeyError: 'rank0'" in Path(result.structured_content["stderr_log"]).read_text()


def test_arguments_that_do_not_fit_the_schema_are_an_error_result(server: McpSession) -> None:
    result = server.call("scan", {"paths": []})
    assert result.is_error
    assert "paths" in text_of(result)
    result = server.call("scan", {"paths": ["x"], "timeout_s": -1})
    assert result.is_error


def test_without_the_sdk_the_server_names_the_extra_to_install() -> None:
    code = "import sys; sys.modules['mcp'] = None; from trainprobe.mcp import main; main()"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: trainprobe mcp needs the MCP Python SDK, which is not installed — "
        "pip install 'trainprobe[mcp]'\n"
    )
    assert proc.stdout == ""


def test_a_far_side_error_is_its_own_sentence_by_the_tasks_rule() -> None:
    from trainprobe.errors import RemoteExceptionError
    from trainprobe.mcp.targets import Place, shown_message

    engine = "local//python=/usr/bin/python3"
    far = RemoteExceptionError(engine, "LogError: /runs/a.log: no such file or directory")
    assert shown_message(far, Place(engine, None)) == "/runs/a.log: no such file or directory"
    assert shown_message(far, Place(engine, "gpu07")) == "gpu07: /runs/a.log: no such file or directory"
    bug = RemoteExceptionError(engine, "ZeroDivisionError: division by zero")  # no trainprobe error: kept
    assert shown_message(bug, Place(engine, "gpu07")) == "gpu07: ZeroDivisionError: division by zero"
