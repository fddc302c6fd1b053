"""The parameter types the tools share: each one's description lands in every input schema that uses it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

Target = Annotated[
    str,
    Field(
        description="Where the files are: `local` (default), or e.g. `ssh=user@host//venv=/root/venv`, "
        "`pct=200`, `docker=NAME`."
    ),
]
Paths = Annotated[
    list[str],
    Field(
        min_length=1,
        description="Files, directories (searched recursively) or globs, expanded on the target.",
    ),
]
Events = Annotated[
    tuple[str, ...],
    Field(description="Regular expressions: matching log lines are events (e.g. `preempted`)."),
]
Threshold = Annotated[float, Field(gt=0, description="Spike threshold (a modified z-score).")]
Timeout = Annotated[
    float,
    Field(gt=0, le=6 * 3600, description="Hard limit in seconds; the work is killed when it runs over."),
]
