"""Setting hops: ``python=PATH``, ``venv=DIR``, ``conda=ENV``, ``cd=DIR``, ``env=K=V``.

They change no argv; they choose the interpreter, directory and environment of the innermost layer.
``python=`` and
``venv=`` paths become argv words and must be in the safe alphabet; the rest travels as JSON over stdin.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote import shell
from trainprobe.remote._record import record, replace
from trainprobe.remote.hops.base import need_value, no_options
from trainprobe.remote.hops.records import FarSettings

TYPE_CHECKING = False  # no typing at run time: every run imports this module
if TYPE_CHECKING:
    from typing import ClassVar

    from typing_extensions import Self


class _OneValue:
    """A setting hop written ``kind=VALUE``: parsed into its one field ``value``, printed back the same."""

    kind: ClassVar[str]
    #: how the hop is written, shown when the value is missing
    example: ClassVar[str]
    #: what the value is called when it becomes an argv word (then checked against the safe alphabet)
    word: ClassVar[str | None] = None
    value: str

    def __init_subclass__(cls, *, kind: str, example: str, word: str | None = None, **rest: object) -> None:
        """A setting's class names them in its header: ``class CdHop(_OneValue, kind="cd",
        example="cd=/data/run7")``."""
        super().__init_subclass__(**rest)
        cls.kind, cls.example, cls.word = kind, example, word

    if TYPE_CHECKING:

        def __init__(self, value: str) -> None: ...

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> Self:
        no_options(cls.kind, options)
        text = need_value(cls.kind, value, cls.example)
        return cls(shell.check_word(text, cls.word) if cls.word else text)

    def spec(self) -> str:
        return f"{self.kind}={self.value}"


@record(frozen=True)
class PythonHop(_OneValue, kind="python", example="python=/usr/bin/python3.11", word="python path"):
    value: str

    def apply(self, settings: FarSettings) -> FarSettings:
        return replace(settings, python=self.value, venv=None, conda=None)


@record(frozen=True)
class VenvHop(_OneValue, kind="venv", example="venv=/root/venv", word="venv directory"):
    value: str

    def apply(self, settings: FarSettings) -> FarSettings:
        return replace(settings, python=None, venv=self.value, conda=None)


@record(frozen=True)
class CondaHop(_OneValue, kind="conda", example="conda=train or conda=/opt/conda/envs/train"):
    value: str

    def apply(self, settings: FarSettings) -> FarSettings:
        return replace(settings, python=None, venv=None, conda=self.value)


@record(frozen=True)
class CdHop(_OneValue, kind="cd", example="cd=/data/run7"):
    value: str

    def apply(self, settings: FarSettings) -> FarSettings:
        return replace(settings, cwd=self.value)


@record(frozen=True)
class EnvHop:
    kind: ClassVar[str] = "env"
    name: str
    value: str

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> EnvHop:
        no_options(cls.kind, options)
        name, sep, val = need_value(cls.kind, value, "env=CUDA_VISIBLE_DEVICES=0").partition("=")
        if not sep or not name or not name.replace("_", "a").isalnum() or name[0].isdigit():
            raise TargetSyntaxError("", f"env= takes NAME=VALUE with a valid variable name (got env={value})")
        return cls(name, val)

    def spec(self) -> str:
        return f"env={self.name}={self.value}"

    def apply(self, settings: FarSettings) -> FarSettings:
        env = (*((k, v) for k, v in settings.env if k != self.name), (self.name, self.value))
        return replace(settings, env=env)
