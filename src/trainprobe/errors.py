"""One exception root for everything trainprobe raises on purpose.

::

    TrainprobeError                    exit 2 unless a subclass says otherwise
    ├── UsageError                     a bad flag, path, target string or config value      (exit 2)
    │   └── MissingExtraError          an optional dependency is not installed: names the extra
    ├── CheckpointError                a checkpoint could not be read                       (exit 2)
    │   ├── UnknownFormatError         not a checkpoint format trainprobe knows
    │   └── CorruptCheckpointError     truncated, a record missing, a header that lies
    ├── RemoteError                    running on a target failed                          (exit 1 or 2)
    │   ├── TargetSyntaxError          the target string does not parse                    (also a UsageError)
    │   ├── UnreachableError           no connection (DNS, refused, connect timeout)
    │   ├── AuthenticationError        the connection was refused at authentication
    │   ├── InterpreterNotFoundError   no Python (with the needed modules) on the far side
    │   ├── RemoteTimeoutError         the run exceeded --timeout; the far side was killed
    │   ├── RemoteKilledError          interrupted locally or the link dropped; the far side was killed
    │   └── RemoteExceptionError       the user's script raised; carries the remote traceback
    ├── LogError                       a training log could not be read
    └── SaveError                      CheckpointWriter failed in its background write

Every error carries the fields that say *which* thing failed (a file, a target, a tensor) and an optional
``hint``, so the CLI can print one sentence: what failed — why — what to try.
"""

from __future__ import annotations


class TrainprobeError(Exception):
    """Root of every error trainprobe raises on purpose."""

    exit_code: int = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} — {self.hint}"


class UsageError(TrainprobeError):
    """The user asked for something that cannot be done as asked."""


class MissingExtraError(UsageError):
    """An optional dependency (torch, matplotlib, the MCP SDK) is not installed: names the extra for it."""

    def __init__(self, module: str, extra: str, needed_by: str) -> None:
        super().__init__(
            f"{needed_by} needs {module}, which is not installed", hint=f"pip install 'trainprobe[{extra}]'"
        )
        self.module = module
        self.extra = extra
        self.needed_by = needed_by


def missing_extra(module: str, *, extra: str, needed_by: str | None = None) -> MissingExtraError:
    """The error for a missing optional dependency, to raise where its import failed (exit 2, as every usage
    error): ``raise missing_extra("matplotlib", extra="plot", needed_by="--png") from None`` says
    "--png needs matplotlib, which is not installed — pip install 'trainprobe[plot]'". The one place that
    words it, so every extra is named the same way."""
    return MissingExtraError(module, extra, needed_by or "trainprobe")


class CheckpointError(TrainprobeError):
    """A checkpoint file or directory could not be read."""

    def __init__(self, path: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"{path}: {message}", hint=hint)
        self.path = path
        self.reason = message


class UnknownFormatError(CheckpointError):
    """The file is not in any checkpoint format trainprobe reads."""


class CorruptCheckpointError(CheckpointError):
    """The file claims a known format but is damaged: truncated, a record missing, sizes that lie."""


class RemoteError(TrainprobeError):
    """Running code on a target failed."""

    exit_code = 1

    def __init__(self, target: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"{target}: {message}" if target else message, hint=hint)
        self.target = target
        self.reason = message


class TargetSyntaxError(RemoteError, UsageError):
    """A target string does not parse."""

    exit_code = 2


class UnreachableError(RemoteError):
    """The target could not be connected to."""


class AuthenticationError(RemoteError):
    """The target refused the credentials."""


class InterpreterNotFoundError(RemoteError):
    """No suitable Python interpreter on the far side."""


class RemoteTimeoutError(RemoteError):
    """The run exceeded its time limit and was killed on the far side."""


class RemoteKilledError(RemoteError):
    """The run was interrupted (Ctrl-C, lost link) and killed on the far side."""


class RemoteExceptionError(RemoteError):
    """The user's script raised an exception on the far side."""

    def __init__(
        self, target: str, message: str, *, remote_traceback: str = "", hint: str | None = None
    ) -> None:
        super().__init__(target, message, hint=hint)
        self.remote_traceback = remote_traceback


class LogError(TrainprobeError):
    """A training log could not be read."""

    def __init__(self, path: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"{path}: {message}", hint=hint)
        self.path = path


class SaveError(TrainprobeError):
    """CheckpointWriter failed; raised on the call after the failure."""

    exit_code = 1


def report_verdict(exit_code: int) -> str:
    """A whole report's one word (``triage``, ``logs``): what its exit code says, ``healthy`` (0),
    ``problems`` (1) or ``not read`` (2, or anything else: what is not known healthy is not called so)."""
    return {0: "healthy", 1: "problems"}.get(exit_code, "not read")
