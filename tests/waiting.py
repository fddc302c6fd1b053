"""How tests wait: for an event (a line, a file, a process state), never for a fixed time.

Deadlines here are hang guards, not performance goals: a test that passes returns at the event, so a generous
deadline costs nothing on a quiet machine and keeps a busy one (``--load``, a CI runner sharing its cores)
from failing by chance. Only a test that is really broken waits this long.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: how long a test waits for an event it caused before it fails
EVENT_DEADLINE_S = 300.0
#: how long a leftover check looks again before it fails (a clean run passes at the first look)
LEFTOVER_DEADLINE_S = 120.0
#: between two looks at /proc or a file while polling for an event: a polling interval, not a wait for time
POLL_S = 0.05


def wait_for(check: Callable[[], object], seconds: float = EVENT_DEADLINE_S, what: str = "the event") -> None:
    """Poll ``check`` until it is true; fail once ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {seconds:g} s")
        time.sleep(POLL_S)  # polling interval
