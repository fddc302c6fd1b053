"""What the tools' document types share. A tool's document type (in its module, :mod:`trainprobe.mcp.tools`)
lists the top-level keys of the JSON document it answers with, which the SDK turns into the tool's
``outputSchema`` (``-> Annotated[CallToolResult, ScanDocument]``).

Every key is optional (``total=False``) and the schemas allow more keys: a document is its command's
``--json``, whose schema grows, and a client must not reject a report for a key added later. A value the
library may leave out is nullable; :func:`trainprobe.mcp.safe.sendable` makes a NaN or an infinity null, so
every float is nullable. The key lists follow the library's ``to_json`` methods (tests/mcp checks each tool's
answer against its schema). The class docstrings are the schemas' descriptions, in the clients' markdown.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict  # pydantic reads typing.TypedDict only from Python 3.12


class VersionedDocument(TypedDict, total=False):
    """The keys every library document has (docs/json.md): its schema, its one-word answer, its exit code
    and a summary of counts."""

    schema_version: int
    verdict: str
    exit_code: int
    summary: dict[str, Any]


class FleetDocument(TypedDict, total=False):
    """A fleet's document (`--json` with a fleet target): one outcome per target."""

    exit_code: int | None
    duration: float | None
    parallel: int
    log_dir: str | None
    counts: dict[str, Any]
    targets: list[Any]
