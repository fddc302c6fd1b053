"""``python -m trainprobe.remote TARGET SCRIPT [-- ARGS...]``: ``trainprobe run`` without the CLI framework.

Standard library only (argparse), so it starts in a fraction of the time typer and rich need, and it works
where only trainprobe's core is installed. Same options, output, log directory and exit codes as
``trainprobe run`` (see docs/remote.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainprobe.remote",
        description="Run a local Python script on TARGET (e.g. ssh=user@host//venv=/opt/venv).",
    )
    parser.add_argument("target")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script, after --")
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("--connect-timeout", type=float, default=10.0)
    parser.add_argument("--need", default="", help="modules the interpreter must have, e.g. torch,numpy")
    parser.add_argument("--json", action="store_true", help="print one JSON document; live output to stderr")
    parser.add_argument("-q", "--quiet", action="store_true", help="no live output and no notes")
    options = parser.parse_args(argv)
    args = options.args[1:] if options.args[:1] == ["--"] else options.args

    from trainprobe.errors import TrainprobeError
    from trainprobe.remote import run

    def sink(stream: object) -> object:
        def write(data: bytes) -> None:
            stream.write(data)  # type: ignore[attr-defined]
            stream.flush()  # type: ignore[attr-defined]

        return None if options.quiet else write

    try:
        result = run(
            options.target,
            options.script,
            args,
            timeout=options.timeout,
            connect_timeout=options.connect_timeout,
            need=[n.strip() for n in options.need.split(",") if n.strip()],
            stdout=sink(sys.stderr.buffer if options.json else sys.stdout.buffer),  # type: ignore[arg-type]
            stderr=sink(sys.stderr.buffer),  # type: ignore[arg-type]
        )
    except TrainprobeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if options.json:
        data = result.to_json()
        data["stdout_log"], data["stderr_log"] = str(result.stdout_path), str(result.stderr_path)
        print(json.dumps(data, indent=2, default=str))
    if result.error is not None:
        print(f"error: {result.error}", file=sys.stderr)
    if not options.quiet:
        print(f"log: {result.log_dir}", file=sys.stderr)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
