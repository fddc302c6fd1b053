"""How a command ends: its exit code, or one line on stderr and the documented code; never a traceback.

::

    TrainprobeError (a usage error too)   error: what failed — why — what to try    its exit_code (2, 1, ...)
    stdout or stderr closed (| head)      nothing                                   141 (128 + SIGPIPE)
    the output cannot be written (ENOSPC) error: cannot write to stdout: ...        2
    another OSError (no such directory)   error: PATH: No such file or directory    2
    Ctrl-C                                error: interrupted                         130
    any other exception (a bug in us)     error: internal error: ... — where its traceback is kept    3

It fails closed: a command that did not finish never exits 0. Any exception that is not one of the above —
a bug, MemoryError, RecursionError, an exit from deep inside a library — prints one line that names it and the
file its traceback was written to (``$XDG_STATE_HOME/trainprobe/crashes/``, default
``~/.local/state/trainprobe/crashes/``), and exits 3. ``--debug`` before the command (``trainprobe --debug
scan ...``) or ``TRAINPROBE_DEBUG=1`` lets every exception through with its traceback (still never exit 0).
"""

from __future__ import annotations

import os
import sys

from trainprobe.cli._streams import OutputError
from trainprobe.errors import TrainprobeError

TYPE_CHECKING = False  # not typing's: this module is on every path, `trainprobe --version` included
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO

EXIT_BROKEN_PIPE = 141
EXIT_INTERRUPTED = 130
#: a command that crashed (a bug in trainprobe, memory exhausted): never 0, never a finding's 1 or usage's 2
EXIT_INTERNAL_ERROR = 3


def guarded(command: Callable[[], int]) -> int:
    """Run ``command`` and return its exit code; every way it can fail becomes one line and a code."""
    try:
        try:
            code = command()
        finally:
            _flush(sys.stdout, "stdout")
        return code
    except BrokenPipeError:
        _detach(sys.stdout)
        _detach(sys.stderr)
        return EXIT_BROKEN_PIPE
    except TrainprobeError as exc:
        if isinstance(exc, OutputError):
            _detach(sys.stdout if exc.stream == "stdout" else sys.stderr)
        elif os.environ.get("TRAINPROBE_DEBUG"):
            raise
        report(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        report("interrupted")
        return EXIT_INTERRUPTED
    except OSError as exc:  # the machine said no (a directory that is not there, a permission, a full disk)
        if os.environ.get("TRAINPROBE_DEBUG"):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        report(f"{where}{exc.strerror or exc}")
        return 2
    except SystemExit as exc:  # a library's sys.exit deep inside a command: its code, never a silent 0
        status = exc.code
        if isinstance(status, int) and not isinstance(status, bool) and status != 0:
            return status
        report(f"internal error: the command stopped early (sys.exit({status!r})) before it finished")
        return EXIT_INTERNAL_ERROR
    except BaseException as exc:  # fail closed: whatever else went wrong is not "healthy"
        if os.environ.get("TRAINPROBE_DEBUG"):
            raise
        report(crash_message(exc))
        return EXIT_INTERNAL_ERROR


def watch_threads() -> list[BaseException]:
    """Have an exception that ends a thread other than the main one recorded (and reported in one line, as
    in the main thread) rather than only printed; returns the list it is recorded in."""
    import threading

    crashed: list[BaseException] = []

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:  # how a thread may end itself on purpose
            return
        exc = args.exc_value if args.exc_value is not None else args.exc_type()
        crashed.append(exc)
        if os.environ.get("TRAINPROBE_DEBUG"):
            threading.__excepthook__(args)
        else:
            report(crash_message(exc))

    threading.excepthook = hook
    return crashed


def crash_message(exc: BaseException) -> str:
    """The one line for an exception trainprobe did not expect: what it was, where its traceback is kept,
    what to do. Writing the traceback may itself fail (no memory, a read-only home): the line says so."""
    kind = type(exc).__name__
    detail = str(exc).split("\n", 1)[0][:300]
    what = f"internal error: {kind}{': ' + detail if detail else ''}"
    where = _keep_traceback(exc)
    kept = f"traceback in {where}" if where else "rerun with 'trainprobe --debug ...' for the traceback"
    return f"{what} — a bug in trainprobe, not a verdict on your files; {kept}; please report it"


def _keep_traceback(exc: BaseException) -> str | None:
    try:
        import time
        import traceback

        state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        folder = os.path.join(state, "trainprobe", "crashes")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt")
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(f"trainprobe {' '.join(sys.argv[1:])!r}\n")
            out.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        return path
    except BaseException:  # no memory, no writable home: the one line still goes out
        return None


def skip_teardown() -> Callable[[int], None]:
    """Let the program end without the interpreter's teardown, which frees every module's objects one by one:
    ~10 ms after a ``run``, ~60 ms once numpy is loaded (more than many commands' own work). Returns the
    function that records the exit code.

    An exit handler registered now — before any library registers one, so it runs after all of them (they
    run last-registered first) — flushes our streams and ends the process with that code. Everything else
    a normal exit does has happened by then: the caller's ``finally`` blocks (a wrapper around ``main``),
    non-daemon threads joined, the other exit handlers run. Under a tracer or coverage (which save their data
    at exit, maybe after us) or when a stream cannot be flushed (the normal exit then reports it), the normal
    exit is kept."""
    import atexit

    # what the program exits with if the command never returned its code (an exception that escaped even
    # guarded): a crash, never "healthy"
    recorded = [EXIT_INTERNAL_ERROR]

    def end() -> None:
        if sys.gettrace() is not None or "coverage" in sys.modules:
            return
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            return
        os._exit(recorded[0])

    atexit.register(end)
    return lambda code: recorded.__setitem__(0, code)


def report(message: str) -> None:
    """``error: message`` on stderr, if stderr still takes it."""
    from trainprobe.cli._output import Output

    try:
        Output().error(message)
    except (OSError, TrainprobeError):
        _detach(sys.stderr)


def _flush(stream: IO[str], name: str) -> None:
    try:
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(name, exc) from None
    except ValueError:  # closed
        pass


def _detach(stream: IO[str]) -> None:
    """Point the stream's descriptor at /dev/null: what is still buffered cannot fail again when the
    interpreter flushes it at exit (which would print 'Exception ignored ...' and exit 120)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
