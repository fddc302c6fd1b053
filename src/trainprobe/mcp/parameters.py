"""The parameter types the tools share: each one's description lands in every input schema that uses it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

#: how a path on the target is written, said in every path parameter's description (the far side expands it)
ON_TARGET = "on the target (`~/x` and `$HOME/x` are the home of the user the work runs as there)"

Target = Annotated[
    str,
    Field(
        description="Where the files are: `local` (default), or e.g. `ssh=user@host//venv=/root/venv`, "
        "`pct=200`, `docker=NAME`; `~` and `$HOME` in its settings (`venv=~/venv`, `cd=~/runs`) are the "
        "far side's home."
    ),
]
Paths = Annotated[
    list[str],
    Field(
        min_length=1,
        description=f"Files, directories (searched recursively) or globs, expanded {ON_TARGET}.",
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
