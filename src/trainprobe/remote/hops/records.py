"""The values hops hand the engine: what setting hops ask of the far side (:class:`FarSettings`), why a
wrapping hop failed (:class:`HopFailure`), and the exit codes of a run that never reached the agent.

Below both :mod:`~trainprobe.remote.hops.protocols` (which names them in its Protocols) and
:mod:`~trainprobe.remote.hops.base` (the helpers hop kinds share), so neither imports the other's module.
"""

from __future__ import annotations

from trainprobe.errors import RemoteError
from trainprobe.remote._record import record

#: exit code of a run whose hop program (ssh, docker, kubectl...) is not installed, as a shell says it
EXIT_NO_PROGRAM = 127
#: exit code of a run that never reached the agent (ssh's own convention)
EXIT_CONNECTION = 255


@record(frozen=True)
class FarSettings:
    """What the setting hops ask of the innermost layer: interpreter, directory, environment.

    Built by folding every setting hop's :meth:`SettingHop.apply` over an empty ``FarSettings``; shipped to
    the far side as JSON, so none of it meets a shell (only ``python``/``venv`` paths become argv words).
    """

    python: str | None = None
    venv: str | None = None
    conda: str | None = None
    cwd: str | None = None
    env: tuple[tuple[str, str], ...] = ()


@record(frozen=True)
class HopFailure:
    """Why a hop failed: the error to raise, one reason, what to try, the run's exit code."""

    error: type[RemoteError]
    reason: str
    hint: str
    exit_code: int = EXIT_CONNECTION

    def to_error(self, target: str) -> RemoteError:
        return self.error(target, self.reason, hint=self.hint or None)


__all__ = ["EXIT_CONNECTION", "EXIT_NO_PROGRAM", "FarSettings", "HopFailure"]
