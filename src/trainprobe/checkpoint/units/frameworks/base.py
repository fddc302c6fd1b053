"""What a framework knows about its checkpoints, behind one small Protocol.

A framework (one module each in ``trainprobe.checkpoint.units.frameworks``) answers three questions:

- ``layout(folder, files, dirs)``: is this directory one checkpoint it wrote? Then which of its files (and
  sub-directories) are the unit's parts, each with a role: ``weights``, ``optimizer``, ``scheduler``,
  ``rng``, ``config``, ``metadata``, or ``state`` (a file holding several of those, as a Lightning ``.ckpt``).
- ``knows(objects)``: is this single file's object one it wrote (a Lightning ``.ckpt``)?
- ``tensor_role(name)``: inside a ``state`` part, is a tensor ``weights``, ``optimizer`` or ``metadata``?
  Non-finite values are findings only in weights, buffers and optimizer state; in metadata (a callback's
  ``inf`` placeholder score, a metric) they are notes. ``None`` leaves the generic rule.

``needs`` lists the parts each of its saves writes (:class:`Need`: the weights always; the optimizer whenever
a scheduler was saved): a unit without one is damaged, whatever the parts it has say. ``counts`` says what
each step source of its units counts (``optimizer steps``, ``epochs``, ``saves``): only
sources that count optimizer steps are compared with each other; ``name_counts(separator)`` what the step in a
unit's name counts, by the separator before the number (accelerate's ``checkpoint_<i>`` counts saves).
``exact_steps``: its step counts every optimizer step, so optimizer counters behind it mean a stale optimizer
file (unless a grad scaler in the unit may skip steps). ``step_counts_every_optimizer``: its step counts the
steps of all its optimizers together (Lightning's ``global_step`` with two optimizers), so the sum of their
counters is what the step is compared with. ``covers_by_partition``: its optimizer state is flat
partitions that say nothing of which parameter they hold, so whether it covers the model is its own
``parts_evidence``, not the generic ``optimizer-covers-model``. ``part_facts(path, ckpt)`` and
``parts_evidence(parts, facts)``: what only this framework can say about the unit's parts as a whole
(DeepSpeed: one optimizer partition per data-parallel rank, covering every parameter), from facts read where
each part is.

:class:`FrameworkBase` holds the answers of a framework that knows nothing beyond its layout; a framework
subclasses it and overrides what it knows.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

if TYPE_CHECKING:
    from trainprobe.checkpoint.evidence import Evidence
    from trainprobe.checkpoint.reading.base import Checkpoint

Role = Literal["weights", "optimizer", "scheduler", "rng", "config", "metadata", "state"]
TensorRole = Literal["weights", "optimizer", "metadata"]
#: A part of a unit as read: (its path, its role, the opened checkpoint).
Opened = tuple[str, Role, "Checkpoint"]

OPTIMIZER_STEPS, EPOCHS, SAVES, UNKNOWN_COUNT = "optimizer steps", "epochs", "saves", "unknown"
#: What a unit's name and its saved step field count in every framework so far; a framework adds what its
#: other sources (a scheduler, trainer_state.json) count: ``counts = {**STEP_COUNTS, "scheduler": EPOCHS}``.
#: A source it leaves out counts something unknown: a user's scheduler may step per epoch or per batch, so
#: it is not compared.
STEP_COUNTS: Mapping[str, str] = {"name": OPTIMIZER_STEPS, "step field": OPTIMIZER_STEPS}


@dataclass(frozen=True)
class Part:
    """One file (or sub-directory: a DCP directory) of a unit, and what it holds."""

    path: str
    role: Role


@dataclass(frozen=True)
class Need:
    """A part a framework's save always writes — whenever the unit holds a part of a role in ``when`` (empty:
    always) — and ``why``: what the framework's own loader does without it. ``names``: the file names that
    are the part (a side file, ``trainer_state.json``), where its role alone does not say it."""

    role: Role
    why: str
    when: tuple[Role, ...] = ()
    names: tuple[str, ...] = ()

    @property
    def what(self) -> str:
        return " or ".join(self.names) if self.names else f"{self.role} file"


@dataclass
class Layout:
    """What a framework says a directory is: its parts, and the sub-directories it claims as parts."""

    framework: str
    parts: list[Part] = field(default_factory=list)
    claimed_dirs: list[str] = field(default_factory=list)


class FactsOfPart(Protocol):
    """What a framework reads of one part's facts (``units.facts.PartFacts``): the part's path and what the
    framework's own ``part_facts`` said of it."""

    @property
    def path(self) -> str: ...

    @property
    def extra(self) -> Mapping[str, Any]: ...


class Framework(Protocol):
    """One framework's knowledge. Register it by a row in ``trainprobe.plugins.FRAMEWORKS``."""

    name: str
    exact_steps: bool
    step_counts_every_optimizer: bool
    covers_by_partition: bool

    @property
    def counts(self) -> Mapping[str, str]:
        """Step source ("name", "step field", "scheduler", "trainer_state.json") -> what it counts."""
        ...

    @property
    def needs(self) -> Sequence[Need]:
        """The parts each of its saves writes (:class:`Need`): one absent is damage."""
        ...

    def name_counts(self, separator: str) -> str:
        """What the step in a unit's name counts, by the separator before it (``_`` in ``checkpoint_3``)."""
        ...

    def layout(self, folder: str, files: Sequence[str], dirs: Sequence[str]) -> Layout | None:
        """The unit ``folder`` is, from the names of its files and sub-directories; None if not ours."""
        ...

    def knows(self, objects: Any) -> bool:
        """Whether a single file's unpickled object was written by this framework."""
        ...

    def tensor_role(self, name: str) -> TensorRole | None:
        """The role of a tensor of a ``state`` part, by its dotted name; None: the generic rule decides."""
        ...

    def part_facts(self, path: str, ckpt: Checkpoint) -> dict[str, Any]:
        """What this framework wants to know of one opened part (JSON-able; read where the part is)."""
        ...

    def parts_evidence(self, parts: Sequence[Part], facts: Sequence[FactsOfPart]) -> list[Evidence]:
        """Evidence about the unit's parts as a whole (``facts``: those of the parts that could be read)."""
        ...


class FrameworkBase:
    """A framework that knows its layout and what its step sources count, and nothing else: it claims no
    single file, leaves tensor roles to the generic rule, reads no facts of its own and has no evidence about
    its parts as a whole. A framework subclasses it, sets ``name`` (and ``counts`` beyond :data:`STEP_COUNTS`)
    and defines ``layout`` (the default claims no folder: a framework of single files only)."""

    name: str
    counts: ClassVar[Mapping[str, str]] = STEP_COUNTS
    needs: ClassVar[Sequence[Need]] = ()
    exact_steps: bool = False
    step_counts_every_optimizer: bool = False
    covers_by_partition: bool = False

    def name_counts(self, separator: str) -> str:
        return self.counts.get("name", UNKNOWN_COUNT)

    def layout(self, folder: str, files: Sequence[str], dirs: Sequence[str]) -> Layout | None:
        return None

    def knows(self, objects: Any) -> bool:
        return False

    def tensor_role(self, name: str) -> TensorRole | None:
        return None

    def part_facts(self, path: str, ckpt: Checkpoint) -> dict[str, Any]:
        return {}

    def parts_evidence(self, parts: Sequence[Part], facts: Sequence[FactsOfPart]) -> list[Evidence]:
        return []


_PATTERNS: tuple[tuple[Role, re.Pattern[str]], ...] = (
    ("optimizer", re.compile(r"(?i)^(optimizer|optim)(_\d+)?\.(pt|pth|bin|safetensors)$|_optim_states\.pt$")),
    ("scheduler", re.compile(r"(?i)^(lr_)?scheduler(_\d+)?\.(pt|pth|bin)$")),
    ("rng", re.compile(r"(?i)^(rng_state.*\.pth|random_states_\d+\.pkl)$")),
    ("config", re.compile(r"(?i)^(training_args\.bin|.*config\.json|trainer_state\.json|.*\.ya?ml)$")),
    (
        "metadata",
        re.compile(
            r"(?i)^(scaler\.pt|sampler(_\d+)?\.bin|custom_checkpoint_\d+\.pkl|latest|.*\.manifest\.json)$"
        ),
    ),
    (
        "weights",
        re.compile(
            r"(?i)^(model|pytorch_model|adapter_model|consolidated|diffusion_pytorch_model)"
            r"([-_.].*)?\.(safetensors|bin|pt|pth)$|_model_states\.pt$|\.index\.json$"
        ),
    ),
)
_DIR_PATTERNS: tuple[tuple[Role, re.Pattern[str]], ...] = (
    ("optimizer", re.compile(r"(?i)^optimizer(_\d+)?$")),
    ("weights", re.compile(r"(?i)^(pytorch_model_fsdp|model)(_\d+)?$")),
)


def role_by_name(path: str, is_dir: bool = False) -> Role:
    """The role a file's (or sub-directory's) name says it has; ``state`` when the name says nothing."""
    name = os.path.basename(path.rstrip("/"))
    for role, pattern in _DIR_PATTERNS if is_dir else _PATTERNS:
        if pattern.search(name):
            return role
    return "state"
