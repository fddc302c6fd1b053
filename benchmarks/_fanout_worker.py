"""One tool's run for ``benchmarks/remote_fanout.py``, in a process of its own: ``python _fanout_worker.py
TOOL SPEC.json`` prints ``{"ok": N, "failed": [...]}``.

Apart from the benchmark, so that the process imports what the tool needs and nothing else: the benchmark's
own imports (pytest, for the sshd fixture code; dataclasses) cost this process ≈ 0.2 s of CPU and a second of
wall time under load, which pdsh, a C program, never pays; ``trainprobe run --on`` does not pay it either.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def trainprobe(spec: dict[str, object]) -> dict[str, object]:
    from trainprobe.remote.fanout import run_fleet

    targets = list(spec["targets"])  # type: ignore[call-overload]
    fleet = run_fleet(targets, str(spec["work"]) + "\n", parallel=int(spec["parallel"]),  # type: ignore[call-overload]
                      timeout=300, connect_timeout=60)  # fmt: skip
    return {
        "ok": sum(o.ok for o in fleet.outcomes),
        "failed": [o.summary for o in fleet.outcomes if not o.ok][:3],
    }


def pssh(spec: dict[str, object]) -> dict[str, object]:
    from pssh.clients import ParallelSSHClient

    hosts = list(spec["hosts"])  # type: ignore[call-overload]
    client = ParallelSSHClient(
        hosts, user=str(spec["user"]), port=int(spec["port"]), pkey=str(spec["key"]),  # type: ignore[call-overload]
        pool_size=int(spec["parallel"]), timeout=60, num_retries=1,  # type: ignore[call-overload]
    )  # fmt: skip
    output = client.run_command(f"python3 -c '{spec['work']}'", stop_on_errors=False)
    client.join(output)
    ok = sum(1 for host in output if host.exception is None and list(host.stdout) and host.exit_code == 0)
    return {"ok": ok, "failed": [str(h.exception) for h in output if h.exception][:3]}


WORKERS = {"trainprobe": trainprobe, "pssh": pssh}

if __name__ == "__main__":
    print(json.dumps(WORKERS[sys.argv[1]](json.loads(Path(sys.argv[2]).read_text()))))
