"""Target strings: ``//``-separated hops, each ``kind=value[,option=value...]`` or a bare ``kind``.

A comma piece that is not ``name=value`` belongs to the value (``env=CUDA_VISIBLE_DEVICES=0,1``).

Examples::

    local
    ssh=root@10.1.2.6
    ssh=bastion//ssh=gpu07:2222//sudo//venv=/opt/train/.venv//cd=/data//env=CUDA_VISIBLE_DEVICES=0

Wrapping hops (ssh, sudo and the container kinds) come first, outermost first; setting hops (python, venv,
conda,
cd, env) come after the last wrapping hop. :func:`parse_target` returns a frozen :class:`Target` whose
``str()`` is
the canonical string again.
"""

from __future__ import annotations

import functools

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote._record import record
from trainprobe.remote.hops import HOP_KINDS
from trainprobe.remote.hops.base import is_setting, is_wrapping
from trainprobe.remote.hops.records import FarSettings

TYPE_CHECKING = False  # no typing at run time (see hops/protocols.py)
if TYPE_CHECKING:
    from trainprobe.remote.hops.protocols import Hop, WrappingHop

SEPARATOR = "//"


@record(frozen=True)
class Target:
    hops: tuple[Hop, ...]

    def __str__(self) -> str:
        return SEPARATOR.join(hop.spec() for hop in self.hops)

    @property
    def wrapping(self) -> tuple[WrappingHop, ...]:
        """The wrapping hops, outermost first (empty for a local target)."""
        return tuple(hop for hop in self.hops if is_wrapping(hop))

    @property
    def settings(self) -> FarSettings:
        settings = FarSettings()
        for hop in self.hops:
            if is_setting(hop):
                settings = hop.apply(settings)
        return settings

    @property
    def slug(self) -> str:
        """A file-name-safe short form, e.g. ``ssh-root-10.1.2.6-venv``."""
        keep = "".join(ch if ch.isalnum() or ch in ".-_" else "-" for ch in str(self).replace("=", "-"))
        return "-".join(part for part in keep.split("-") if part)[:80] or "local"


def _parse_hop(text: str, whole: str) -> Hop:
    kind, sep, rest = text.partition("=")
    cls = HOP_KINDS.get(kind)
    if cls is None:
        valid = ", ".join(sorted(HOP_KINDS))
        why = "empty hop (two '//' in a row?)" if not text else f"unknown hop kind {kind!r}"
        raise TargetSyntaxError(
            whole, f"{why}; valid kinds: {valid}", hint="write hops as kind=value//kind=value"
        )
    value: str | None = None
    options: dict[str, str] = {}
    if sep:
        value, *pieces = rest.split(",")
        for piece in pieces:
            key, eq, val = piece.partition("=")
            if eq and key.replace("_", "a").replace("-", "a").isalnum() and not key[0].isdigit():
                options[key] = val
            elif options:
                raise TargetSyntaxError(whole, f"{kind}=: {piece!r} after the options is not name=value")
            else:  # a comma inside the value, e.g. env=CUDA_VISIBLE_DEVICES=0,1
                value += "," + piece
    try:
        return cls.parse(value, options)
    except TargetSyntaxError as exc:
        if exc.target:
            raise
        raise TargetSyntaxError(whole, exc.reason, hint=exc.hint) from None


@functools.lru_cache(maxsize=1024)
def parse_target(text: str) -> Target:
    """Parse a target string; TargetSyntaxError names the bad part (an unknown kind lists the valid ones)."""
    text = text.strip()
    if not text:
        raise TargetSyntaxError(
            "", "empty target", hint="e.g. local, ssh=user@host, ssh=host//venv=/opt/venv"
        )
    hops = tuple(_parse_hop(part, text) for part in text.split(SEPARATOR))
    seen_setting: Hop | None = None
    for index, hop in enumerate(hops):
        if is_setting(hop):
            seen_setting = hop
        elif seen_setting is not None:
            raise TargetSyntaxError(
                text,
                f"{hop.spec()} comes after {seen_setting.spec()}",
                hint="setting hops (python, venv, conda, cd, env) go after the last ssh/sudo/container hop",
            )
        elif hop.kind == "local" and index:
            raise TargetSyntaxError(text, "local can only be the first hop")
    return Target(hops)
