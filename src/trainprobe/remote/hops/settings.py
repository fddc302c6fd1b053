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


@record(frozen=True)
class PythonHop:
    kind: ClassVar[str] = "python"
    path: str

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> PythonHop:
        no_options(cls.kind, options)
        return cls(shell.check_word(need_value(cls.kind, value, "python=/usr/bin/python3.11"), "python path"))

    def spec(self) -> str:
        return f"python={self.path}"

    def apply(self, settings: FarSettings) -> FarSettings:
        return replace(settings, python=self.path, venv=None, conda=None)


@record(frozen=True)
class VenvHop:
    kind: ClassVar[str] = "venv"
    path: str

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> VenvHop:
        no_options(cls.kind, options)
        return cls(shell.check_word(need_value(cls.kind, value, "venv=/root/venv"), "venv directory"))

    def spec(self) -> str:
        return f"venv={self.path}"

    def apply(self, settings: FarSettings) -> FarSettings:
        return replace(settings, python=None, venv=self.path, conda=None)


@record(frozen=True)
class CondaHop:
    kind: ClassVar[str] = "conda"
    env: str

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> CondaHop:
        no_options(cls.kind, options)
        return cls(need_value(cls.kind, value, "conda=train or conda=/opt/conda/envs/train"))

    def spec(self) -> str:
        return f"conda={self.env}"

    def apply(self, settings: FarSettings) -> FarSettings:
        return replace(settings, python=None, venv=None, conda=self.env)


@record(frozen=True)
class CdHop:
    kind: ClassVar[str] = "cd"
    path: str

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> CdHop:
        no_options(cls.kind, options)
        return cls(need_value(cls.kind, value, "cd=/data/run7"))

    def spec(self) -> str:
        return f"cd={self.path}"

    def apply(self, settings: FarSettings) -> FarSettings:
        return replace(settings, cwd=self.path)


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
