"""Run Python on a target reached through a chain of hops (ssh, sudo, containers, venvs).

::

    from trainprobe import remote

    result = remote.run("ssh=root@10.1.2.6//venv=/root/venv", "check_ckpt.py", ["/ckpts"], timeout=600)
    result.exit_code, result.result, result.log_dir, result.error

    remote.call("ssh=gpu07", some_module.function, arg1, key=value)   # its return value

- :func:`run` (``target, script, args=(), *, timeout, connect_timeout, need, stdout, stderr, log_dir``) →
  :class:`RunResult`; failures are carried in ``RunResult.error``, never raised, so fan-out is easy.
- :func:`call` (``target, function, *args, **kwargs``) → the function's value; raises the RemoteError.
- :func:`parse_target` → :class:`Target`; kinds are listed in :data:`trainprobe.remote.hops.HOP_KINDS`.

Modules, one concern each: ``target`` and ``hops/`` (the target string, one module per hop kind), ``argv``
(pure argv building), ``session`` (the one place that starts a process), ``api`` (run, call), ``shipping``
(modules sent to the far side), ``fleet`` (target ranges, names and groups), ``fanout`` (running a fleet),
``fleet_result`` (its outcomes), ``live_output`` (output of many targets, line by line), ``slurm_jobs`` (a
Slurm job's nodes), ``probe``; ``_stage1`` and ``agent`` run on the far side. This package imports no other
capability package of trainprobe (a test checks).

See docs/remote.md for the target syntax, exit codes, log directory and the far-side protocol.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: a run's path imports no typing (tests/remote/test_run_imports.py)
if TYPE_CHECKING:
    from trainprobe.remote.api import call, run
    from trainprobe.remote.session import Module, RunResult
    from trainprobe.remote.shipping import modules_for
    from trainprobe.remote.target import Target, parse_target

#: this face's names -> the module each lives in, imported when a name is first asked for: any module under
#: ``remote/`` runs this ``__init__`` first, and reading the hop registry (the target help of ``trainprobe
#: run --help`` and of the MCP tools) must not start the engine (tests/cli/test_import_budget.py)
_HOMES = {
    "call": "api",
    "run": "api",
    "Module": "session",
    "RunResult": "session",
    "modules_for": "shipping",
    "Target": "target",
    "parse_target": "target",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # asked once
    return value


__all__ = ["Module", "RunResult", "Target", "call", "modules_for", "parse_target", "run"]
