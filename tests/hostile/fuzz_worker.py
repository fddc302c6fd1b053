"""The fuzzer's worker: runs trainprobe command lines in this one process, as many as it is given, under the
hostile-input limits (``python -m hostile.fuzz_worker``, with ``tests/`` on the path).

Reads one JSON object per line on stdin, ``{"id": N, "argv": [...]}``; runs ``trainprobe.cli.main(argv)``
with stdout and stderr captured (the same code path as the ``trainprobe`` program, without a process start
per case); writes one JSON line per case: the exit code, the traceback if main raised (a bug: the program
would have printed it), the seconds, and how far the process's peak memory grew during the case. The parent
enforces a time limit per case by killing the worker (then starts another)."""

from __future__ import annotations

import contextlib
import io
import json
import resource
import sys
import time
import traceback


def main() -> None:
    from hostile.limits import limit_resources

    limit_resources(cpu_seconds=3600)
    from trainprobe.cli import main as trainprobe

    out = sys.__stdout__
    assert out is not None
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        captured = io.StringIO()
        crash = None
        started = time.perf_counter()
        code: int | None = None
        try:
            with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
                code = trainprobe(request["argv"])
        except BaseException:  # what the program would have shown as a traceback
            crash = traceback.format_exc()
        seconds = time.perf_counter() - started
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        text = captured.getvalue()
        if crash is None and "Traceback (most recent call last)" in text:
            crash = text[-4000:]
        reply = {"id": request["id"], "code": code, "crash": crash, "seconds": seconds, "grown_mb": grown}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
