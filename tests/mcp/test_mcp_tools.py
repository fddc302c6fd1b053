"""Each tool through a real server process: its structured content is the library's JSON document, its text a
summary that ends with the full report's path; the tool list teaches the target syntax."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp_harness import McpSession, assert_kept_in_full, text_of, without_timings

from trainprobe.checkpoint import scan
from trainprobe.checkpoint.check import check_paths_json
from trainprobe.checkpoint.diff import diff_paths_json
from trainprobe.metrics import analyze

TOOLS = {"triage", "scan", "check", "diff", "logs", "watch_tail", "probe", "run"}


def test_tools_are_listed_with_schemas_that_teach_the_target_syntax(server: McpSession) -> None:
    tools = {tool.name: tool for tool in server.tools()}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        schema = tool.input_schema["properties"]
        assert schema["target"]["default"] == "local", name
        assert "ssh=user@host//venv=/root/venv" in schema["target"]["description"]
        assert "timeout_s" in schema, name
        description = tool.description or ""
        for example in ("ssh=user@host", "venv=/root/venv", "pct=200", "docker=NAME", "//"):
            assert example in description, (name, example)
        assert f"trainprobe {name.replace('watch_tail', 'watch')} --json" in description
        assert ("fleet" in description) == (name in ("probe", "run")), name
    assert tools["scan"].input_schema["required"] == ["paths"]
    assert tools["diff"].input_schema["required"] == ["a", "b"]
    assert tools["run"].input_schema["properties"]["args"]["type"] == "array"
    assert tools["triage"].annotations is not None
    assert tools["triage"].annotations.read_only_hint
    assert tools["run"].annotations is not None
    assert not tools["run"].annotations.read_only_hint


#: keys each tool's output schema declares (of more): its command's --json document, a fleet's for a fleet
DECLARED = {
    "triage": {"verdict", "exit_code", "answers", "conclusions", "resume_from", "units"},
    "scan": {"schema_version", "verdict", "exit_code", "totals", "units", "files"},
    "check": {"schema_version", "verdict", "exit_code", "summary", "units"},
    "diff": {"a", "b", "verdict", "exit_code", "tensors", "same_run"},
    "logs": {"schema_version", "exit_code", "summary", "runs", "findings", "not_read"},
    "watch_tail": {"summary", "runs", "findings", "tail"},
    "probe": {"target", "host", "interpreters", "gpus", "processes", "counts", "targets"},
    "run": {"target", "exit_code", "result", "error", "stdout_log", "stderr_log", "counts", "targets"},
}


def test_each_tool_declares_its_document_as_an_output_schema(server: McpSession) -> None:
    from trainprobe.mcp.tools import tool as record

    tools = {tool.name: tool for tool in server.tools()}
    assert set(DECLARED) == TOOLS
    for name, keys in DECLARED.items():
        schema = tools[name].output_schema
        assert schema is not None, name
        assert schema["title"] == record(name).document.__name__  # the type its record names
        assert schema["type"] == "object", name
        assert keys <= set(schema["properties"]), (name, keys - set(schema["properties"]))
        assert not schema.get("required"), name  # a key the library leaves out is no invalid answer
        assert schema.get("additionalProperties") is not False, name  # nor one it adds later
    assert tools["scan"].output_schema["properties"]["exit_code"]["type"] == "integer"  # type: ignore[index]
    assert "--json" in tools["scan"].output_schema["description"]  # type: ignore[index]


def test_scan_is_the_library_scan(server: McpSession, checkpoints: Path) -> None:
    paths = [str(checkpoints / "clean.pt"), str(checkpoints / "bad.safetensors")]
    result = server.call("scan", {"paths": paths, "stats": True})
    text = text_of(result)
    assert not result.is_error
    assert without_timings(result.structured_content) == without_timings(scan(paths, stats=True).to_json())
    assert text.startswith("scan: nonfinite (exit code 1) — 2 file(s)")
    assert "- nonfinite: " + str(checkpoints / "bad.safetensors") in text
    assert "b float32 [4]: NaN 1, +Inf 1, -Inf 1, first bad at [1]" in text
    assert_kept_in_full(text, result.structured_content)


def test_a_missing_checkpoint_is_reported_unreadable_as_the_cli_does(
    server: McpSession, tmp_path: Path
) -> None:
    result = server.call("scan", {"paths": [str(tmp_path / "gone.pt")]})
    assert not result.is_error  # a report, exit code 2, as `trainprobe scan` prints one
    assert result.structured_content["exit_code"] == 2
    assert f"- unreadable: {tmp_path / 'gone.pt'} (unknown format): no such file or directory" in text_of(
        result
    )


def test_check_is_the_library_check(server: McpSession, checkpoints: Path) -> None:
    paths = [str(checkpoints)]
    result = server.call("check", {"paths": paths})
    assert not result.is_error
    assert result.structured_content == check_paths_json(paths)
    text = text_of(result)
    assert text.startswith(f"check (exit code 1): {len(result.structured_content['units'])} checkpoint(s)")
    assert str(checkpoints / "bad.safetensors") in text.splitlines()[1]  # the non-finite one first


def test_diff_is_the_library_diff(server: McpSession, checkpoints: Path) -> None:
    a, b = str(checkpoints / "pair" / "a.pt"), str(checkpoints / "pair" / "b.pt")
    result = server.call("diff", {"a": a, "b": b})
    assert not result.is_error
    assert result.structured_content == diff_paths_json(a, b)
    text = text_of(result)
    assert "2 tensor(s): 1 changed, 1 identical" in text or "2 tensor(s): 1 identical, 1 changed" in text
    assert "- layer.weight: 0.5 (max |A-B| 0.5)" in text


def test_logs_is_the_library_analysis(server: McpSession, train_log: Path) -> None:
    result = server.call("logs", {"paths": [str(train_log)], "threshold": 6.0})
    assert not result.is_error
    assert result.structured_content == analyze([train_log]).to_json()
    text = text_of(result)
    assert text.startswith("logs: 1 finding(s) (1 error) in 1 run(s)")
    assert "- error spike train/loss step 120: " in text
    assert_kept_in_full(text, result.structured_content)


def test_watch_tail_reads_only_the_end_and_what_is_new(server: McpSession, train_log: Path) -> None:
    result = server.call("watch_tail", {"path": str(train_log), "lines": 100})
    assert not result.is_error
    doc = result.structured_content
    assert doc["tail"]["lines"] == 100
    assert doc["tail"]["from_byte"] > 0
    assert doc["tail"]["file_bytes"] == train_log.stat().st_size
    assert train_log.read_bytes()[doc["tail"]["from_byte"] :].startswith(b"step: 100 ")
    assert [(f["kind"], f["step"]) for f in doc["findings"]] == [("spike", 120)]
    assert "- error spike train/loss step 120" in text_of(result)

    later = server.call("watch_tail", {"path": str(train_log), "since_step": 120})
    assert later.structured_content["findings"] == []
    assert later.structured_content["tail"]["findings_before_since_step"] == 1
    assert "0 finding(s) (none) after step 120 (1 earlier left out)" in text_of(later)


def test_probe_this_machine(server: McpSession) -> None:
    result = server.call("probe", {"cuda": False})
    assert not result.is_error
    doc = result.structured_content
    assert doc["target"] == f"local//python={sys.executable}"  # the server's own interpreter, not discovery's
    assert doc["agent_python"] == sys.executable
    assert text_of(result).startswith(f"probe {doc['target']}: host {doc['host']}")


def test_probe_a_fleet_from_a_group_of_the_targets_file(server: McpSession) -> None:
    result = server.call("probe", {"target": "two-locals", "cuda": False})
    assert not result.is_error
    doc = result.structured_content
    assert [o["target"] for o in doc["targets"]] == ["local//env=TP_SIDE=a", "local//env=TP_SIDE=b"]
    assert doc["counts"] == {"total": 2, "ok": 2}
    assert doc["exit_code"] == 0
    assert text_of(result).startswith("probe on 2 target(s): 2 ok (exit code 0)")


def test_run_passes_arguments_exactly_and_returns_main(server: McpSession) -> None:
    script = "import sys\nprint('args', sys.argv[1:])\ndef main():\n    return {'n': len(sys.argv) - 1}\n"
    args = ["$HOME", "it's", "!x", "a b", "{}", "`id`"]
    result = server.call("run", {"script": script, "args": args})
    assert not result.is_error
    doc = result.structured_content
    assert doc["exit_code"] == 0
    assert doc["result"] == {"n": 6}
    assert doc["error"] is None
    assert Path(doc["stdout_log"]).read_text() == f"args {args}\n"
    text = text_of(result)
    assert 'main() returned: {"n": 6}' in text
    assert f"stdout ({len(f'args {args}') + 1} bytes):\nargs {args}" in text


def test_run_on_a_fleet(server: McpSession) -> None:
    script = "import os\ndef main():\n    return os.environ['TP_SIDE']\n"
    result = server.call("run", {"script": script, "target": "two-locals"})
    doc = result.structured_content
    assert [o["result"] for o in doc["targets"]] == ["a", "b"]
    assert '- local//env=TP_SIDE=a: ok, exit 0: "a"' in text_of(result)


def test_a_long_output_says_what_was_left_out_and_where_it_is(server: McpSession) -> None:
    script = "for i in range(20000):\n    print(f'line {i:05d}')\n"
    result = server.call("run", {"script": script})
    text = text_of(result)
    stdout = Path(result.structured_content["stdout_log"])
    assert stdout.stat().st_size == 20000 * 11  # all of it kept
    assert "line 19999" in text
    assert "line 00000" not in text
    header = next(line for line in text.splitlines() if line.startswith("stdout ("))
    left_out = int(header.split("the first ")[1].split(" left out")[0].replace(",", ""))
    shown = text.split(header + "\n", 1)[1].split("\nstderr")[0]
    assert left_out + len(shown) + 1 == 220_000  # what is shown plus what was left out is the whole
    assert f"all of it in {stdout})" in header
    assert len(text) < 8000


def test_a_long_list_says_how_many_more_are_in_the_report(server: McpSession, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    for i in range(13):
        save_file({"w": torch.tensor([float("nan"), float(i)])}, str(tmp_path / f"bad{i:02d}.safetensors"))
    result = server.call("scan", {"paths": [str(tmp_path)]})
    text = text_of(result)
    assert text.count("- nonfinite: ") == 10
    assert "… 3 more files that are not clean in the full report" in text
    assert len(result.structured_content["files"]) == 13


def test_a_tool_is_its_module_and_its_name_in_the_table() -> None:
    import trainprobe.mcp.tools as package
    from trainprobe.mcp.tools import NAMES, TOOLS

    modules = sorted(p.stem for p in Path(package.__file__).parent.glob("*.py") if p.stem != "__init__")
    assert sorted(NAMES) == modules  # a module not in NAMES would be a tool nobody can call
    assert [record.name for record in TOOLS] == list(NAMES)


def test_the_target_help_names_every_hop_kind_of_the_registry() -> None:
    from trainprobe.mcp.server import TARGET_HELP
    from trainprobe.remote.hops import kinds_help

    for usage, meaning in kinds_help():
        assert f"`{usage}`: {meaning}" in TARGET_HELP
