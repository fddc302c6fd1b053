"""``watch`` where the log is (``watch --on TARGET PATH``): the far side follows the file
(``_follower_script``, stdlib only, sent as a script by the remote engine), lines come back live, and
:class:`~trainprobe.metrics.follow.OnlineAnalyzer` runs the detectors here as they arrive, as a local
``watch`` does; ``~`` and ``$HOME`` in the path are the home of the user the follower runs as there. A
dropped link reconnects and resumes from the last byte offset received, so no line is lost or repeated. One
target: a fleet's logs are one stream each (run one ``watch`` per target).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainprobe.errors import RemoteError
from trainprobe.remote.session import CONNECT_TIMEOUT_S

TYPE_CHECKING = False
if TYPE_CHECKING:
    from trainprobe.metrics import Finding, LogReport, Options
    from trainprobe.remote.target import Target

FOLLOWER_SCRIPT = Path(__file__).with_name("_follower_script.py")


@dataclass
class RemoteFollower:
    """Runs the follower on ``target`` until ``cancel`` is set; ``on_lines`` gets each batch of new lines.
    ``ident``, ``offset`` (the file and the byte the next line starts at), ``connections`` and
    ``remote_pid`` say where it is; a reconnection resumes there."""

    target: str
    path: str
    on_lines: Callable[[list[str]], None]
    interval: float = 1.0
    reconnect_delay: float = 1.0
    max_failures: int = 5
    notify: Callable[[str], None] = lambda _m: None
    connect_timeout: float = CONNECT_TIMEOUT_S
    ident: str = field(default="-", init=False)
    offset: int = field(default=0, init=False)
    connections: int = field(default=0, init=False)
    remote_pid: int | None = field(default=None, init=False)
    _buf: bytearray = field(default_factory=bytearray, init=False, repr=False)

    def _sink(self, chunk: bytes) -> None:
        self._buf.extend(chunk)
        cut = self._buf.rfind(b"\n")
        if cut < 0:
            return
        block = bytes(self._buf[:cut])
        del self._buf[: cut + 1]
        lines: list[str] = []
        for raw in block.split(b"\n"):
            if raw.startswith(b"#pid "):
                self.remote_pid = int(raw[5:])
                continue
            parts = raw.decode("utf-8", errors="replace").split(" ", 2)
            if len(parts) < 2 or not parts[1].isdigit():
                continue  # not a follower line (nothing else should write to stdout)
            self.ident, self.offset = parts[0], int(parts[1])
            lines.append(parts[2] if len(parts) == 3 else "")
        if lines:
            self.on_lines(lines)

    def run(self, cancel: threading.Event) -> None:
        from trainprobe import remote
        from trainprobe.remote.session import with_discovery

        failures = 0
        while not cancel.is_set():
            self._buf.clear()
            before = (self.ident, self.offset)
            self.connections += 1
            result = remote.run(
                self.target,
                FOLLOWER_SCRIPT,
                [self.path, self.ident, str(self.offset), str(self.interval)],
                stdout=self._sink,
                cancel=cancel,
                connect_timeout=self.connect_timeout,
                modules=with_discovery([]),  # the far side's home, for a path under ~ or $HOME
            )
            if cancel.is_set():
                return
            if result.error is not None and self.remote_pid is None:
                raise result.error  # never got through (a typo, no route, no Python): no point retrying
            failures = 0 if (self.ident, self.offset) != before else failures + 1
            err = result.error
            reason = err.reason if err is not None else f"the follower exited with {result.exit_code}"
            if failures >= self.max_failures:
                raise RemoteError(
                    self.target,
                    f"watching {self.path} failed {failures} times in a row: {reason}",
                    hint="check the target with `trainprobe run TARGET` and the path",
                )
            self.notify(f"link to {self.target} dropped ({reason}); reconnecting from byte {self.offset}")
            cancel.wait(self.reconnect_delay)


def watch_on(
    target: str | Target,
    path: str,
    on_finding: Callable[[Finding], None],
    *,
    options: Options | None = None,
    interval: float = 1.0,
    notify: Callable[[str], None] = lambda _m: None,
    cancel: threading.Event | None = None,
    reconnect_delay: float = 1.0,
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> LogReport | None:
    """Follow ``path`` on ``target`` until Ctrl-C (or ``cancel``), calling ``on_finding`` per new finding;
    the summary report at the end (None when fewer than two metric rows arrived), as
    :func:`trainprobe.metrics.follow.watch_file` gives for a local file.

    Lines arrive on a background thread; the detectors run here every ``interval`` seconds. Raises the
    run's RemoteError when the target cannot be reached at all, or the link keeps failing."""
    from trainprobe.metrics import Options
    from trainprobe.metrics.follow import OnlineAnalyzer

    cancel = cancel or threading.Event()
    online = OnlineAnalyzer(Path(path).stem, options or Options())
    lock = threading.Lock()
    failure: list[BaseException] = []

    def on_lines(lines: list[str]) -> None:
        with lock:
            online.feed(lines)

    follower = RemoteFollower(
        str(target), path, on_lines, interval=min(interval, 0.5), notify=notify,
        reconnect_delay=reconnect_delay, connect_timeout=connect_timeout,
    )  # fmt: skip

    def follow() -> None:
        try:
            follower.run(cancel)
        except BaseException as exc:  # handed to the main thread
            failure.append(exc)
            cancel.set()

    thread = threading.Thread(target=follow, name="trainprobe-watch-remote", daemon=True)
    thread.start()
    try:
        while not cancel.wait(interval):
            with lock:
                fresh = online.new_findings()
            for f in fresh:
                on_finding(f)
    except KeyboardInterrupt:
        pass
    finally:
        cancel.set()
        thread.join(30)
    if failure:
        raise failure[0]
    with lock:
        fresh = online.new_findings(final=True) if len(online.run()) >= 2 else []
    for f in fresh:
        on_finding(f)
    return online.report
