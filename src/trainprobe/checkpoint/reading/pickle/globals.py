"""Which pickle globals are data, which are known classes, and which would run code: the one rule.

The safe unpickler never imports and never calls anything a file names. This table only decides what it
*reports*. Every lookup is an exact ``(module, name)`` pair — no module prefixes, no dotted names (a dotted
name such as ``Path.touch`` reaches a method, so it is never in the table) — with one namespace rule:
TorchScript's ``__torch__.*`` classes, which exist only inside a TorchScript archive.

- ``data``: what ``torch.load(weights_only=True)`` of the pinned torch admits (:mod:`.torch_admits`, generated
  from torch's own unpickler: tensor and storage machinery, dtypes, sparse and nested tensors, DTensor and
  DeviceMesh state, ``OrderedDict``), plus :data:`INERT_BEYOND_TORCH` (numpy arrays, stdlib values, DCP
  metadata), each with why it is inert. Reported as nothing.
- ``class`` / ``enum``: a known data or config class (TrainingArguments, omegaconf, argparse.Namespace,
  Lightning's AttributeDict, a ``torch.nn`` module of a whole pickled model, quantized-tensor schemes...).
  Reconstructing one is a *note*: "loading it needs torch.load(weights_only=False)". A ``class`` entry
  *called* with arguments (REDUCE instead of the NEWOBJ/BUILD that pickling an instance writes) would run
  its constructor: that is suspicious. An ``enum`` is called with its value by design.
- ``torchscript``: a TorchScript class or ``torch.jit._pickle`` helper: a note ("needs torch.jit.load").
- anything else is **suspicious** (exit 1), named in the report.

Imports only the standard library (shipped with ``trainprobe.checkpoint``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from trainprobe.checkpoint.reading.pickle.nn_classes import NN_MODULE_CLASSES
from trainprobe.checkpoint.reading.pickle.torch_admits import (
    TORCH_DEFAULT_GLOBALS,
    TORCH_REGISTERED_GLOBALS,
)

Kind = Literal["data", "class", "enum", "torchscript"]


@dataclass(frozen=True)
class KnownGlobal:
    """What a pickle global is: its ``kind`` and, for classes, the words a note uses (``what``)."""

    kind: Kind
    what: str = ""


# Why each global trainprobe takes as data beyond torch's allowlist is inert (torch.load(weights_only=True)
# refuses these; the safe unpickler builds each as itself, a harmless equivalent, or an Opaque placeholder
# that records its arguments, and nothing named by the file runs).
_STDLIB_VALUE = "a standard-library value type: building one runs no code of the file's choosing"
_TORCH_ENUM = "a torch layout or memory-format constant: a name, no behaviour"
_NUMPY = "numpy arrays, dtypes and RNG states (as in a trainer's rng_state.pth): rebuilt as placeholders"
_DCP_METADATA = "torch.distributed.checkpoint's .metadata dataclasses: plain fields trainprobe reads"
_PATH = "a pathlib path: a value; only a dotted name (Path.touch) reaches a method, and none is here"

_BUILTIN_VALUES = (
    "frozenset",
    "slice",
    "object",
    "range",
    "int",
    "float",
    "str",
    "bool",
    "dict",
    "list",
    "tuple",
)

INERT_BEYOND_TORCH: dict[tuple[str, str], str] = {
    ("torch.nn.parameter", "Buffer"): "torch's Parameter twin for buffers: a tensor wrapper, no code",
    **dict.fromkeys(
        [
            ("torch", name)
            for name in (
                "strided",
                "sparse_coo",
                "sparse_csr",
                "contiguous_format",
                "channels_last",
                "channels_last_3d",
                "preserve_format",
            )
        ],
        _TORCH_ENUM,
    ),
    **dict.fromkeys(
        [("collections", "defaultdict"), ("collections", "deque"), ("copyreg", "_reconstructor")]
        + [("builtins", name) for name in _BUILTIN_VALUES]
        + [("datetime", name) for name in ("datetime", "date", "time", "timedelta", "timezone")]
        + [("decimal", "Decimal"), ("fractions", "Fraction"), ("uuid", "UUID")],
        _STDLIB_VALUE,
    ),
    **dict.fromkeys(
        [("numpy", "ndarray"), ("numpy", "dtype")]
        + [
            (f"numpy.{core}.multiarray", name)
            for core in ("core", "_core")
            for name in ("_reconstruct", "scalar")
        ]
        + [
            ("numpy.random._pickle", name)
            for name in ("__randomstate_ctor", "__bit_generator_ctor", "__generator_ctor")
        ],
        _NUMPY,
    ),
    **dict.fromkeys(
        [
            ("torch.distributed.checkpoint.metadata", name)
            for name in (
                "Metadata",
                "MetadataIndex",
                "TensorStorageMetadata",
                "BytesStorageMetadata",
                "ChunkStorageMetadata",
                "TensorProperties",
                "StorageMeta",
                "_MEM_FORMAT_ENCODING",
            )
        ]
        + [
            ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
            ("torch.distributed.checkpoint.planner", "LoadItemType"),
            ("torch.distributed.checkpoint.planner", "WriteItemType"),
            ("torch.distributed._shard.sharded_tensor.metadata", "TensorProperties"),
            ("torch.distributed._shard.metadata", "ShardMetadata"),
        ],
        _DCP_METADATA,
    ),
    **dict.fromkeys(
        [
            ("pathlib", name)
            for name in ("Path", "PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath")
        ],
        _PATH,
    ),
}

# Known data and config classes: reconstructing one is a note, calling one is suspicious.
_CLASSES: dict[tuple[str, str], str] = {
    ("argparse", "Namespace"): "argparse.Namespace",
    ("types", "SimpleNamespace"): "types.SimpleNamespace",
    ("transformers.training_args", "TrainingArguments"): "transformers TrainingArguments",
    ("transformers.training_args_seq2seq", "Seq2SeqTrainingArguments"): "transformers Seq2SeqArguments",
    ("transformers.trainer_pt_utils", "AcceleratorConfig"): "transformers AcceleratorConfig",
    ("transformers.trainer_callback", "TrainerState"): "transformers TrainerState",
    ("transformers.trainer_callback", "TrainerControl"): "transformers TrainerControl",
    ("transformers.generation.configuration_utils", "GenerationConfig"): "transformers GenerationConfig",
    ("accelerate.utils.dataclasses", "DeepSpeedPlugin"): "accelerate DeepSpeedPlugin",
    ("accelerate.utils.dataclasses", "FullyShardedDataParallelPlugin"): "accelerate FSDP plugin",
    ("accelerate.utils.dataclasses", "DataLoaderConfiguration"): "accelerate DataLoaderConfiguration",
    ("accelerate.utils.dataclasses", "ProjectConfiguration"): "accelerate ProjectConfiguration",
    ("accelerate.utils.dataclasses", "GradientAccumulationPlugin"): "accelerate GradientAccumulationPlugin",
    # TrainingArguments (transformers 5) keeps the accelerate state it set up: rebuilt, never initialised.
    ("accelerate.state", "PartialState"): "accelerate PartialState",
    ("accelerate.state", "AcceleratorState"): "accelerate AcceleratorState",
    ("lightning.fabric.utilities.data", "AttributeDict"): "Lightning AttributeDict",
    ("lightning_fabric.utilities.data", "AttributeDict"): "Lightning AttributeDict",
    ("pytorch_lightning.utilities.parsing", "AttributeDict"): "Lightning AttributeDict",
    ("omegaconf.dictconfig", "DictConfig"): "omegaconf DictConfig",
    ("omegaconf.listconfig", "ListConfig"): "omegaconf ListConfig",
    ("omegaconf.base", "ContainerMetadata"): "omegaconf ContainerMetadata",
    ("omegaconf.base", "Metadata"): "omegaconf Metadata",
    ("omegaconf.nodes", "AnyNode"): "omegaconf AnyNode",
    ("omegaconf.nodes", "StringNode"): "omegaconf StringNode",
    ("omegaconf.nodes", "IntegerNode"): "omegaconf IntegerNode",
    ("omegaconf.nodes", "FloatNode"): "omegaconf FloatNode",
    ("omegaconf.nodes", "BooleanNode"): "omegaconf BooleanNode",
    ("typing", "Any"): "typing.Any",
    ("deepspeed.runtime.fp16.loss_scaler", "LossScaler"): "DeepSpeed LossScaler",
    ("deepspeed.runtime.fp16.loss_scaler", "DynamicLossScaler"): "DeepSpeed DynamicLossScaler",
    ("deepspeed.utils.tensor_fragment", "fragment_address"): "DeepSpeed fragment_address",
    ("torch.optim.lr_scheduler", "LambdaLR"): "torch LambdaLR scheduler",
    ("torch.nn.parameter", "UninitializedParameter"): "torch.nn.UninitializedParameter",
    ("torch.nn.parameter", "UninitializedBuffer"): "torch.nn.UninitializedBuffer",
}

# Enums: called with their value when unpickled, by design.
_ENUMS: dict[tuple[str, str], str] = {
    ("enum", "Enum"): "enum.Enum",
    ("transformers.trainer_utils", "IntervalStrategy"): "transformers IntervalStrategy",
    ("transformers.trainer_utils", "SaveStrategy"): "transformers SaveStrategy",
    ("transformers.trainer_utils", "HubStrategy"): "transformers HubStrategy",
    ("transformers.trainer_utils", "SchedulerType"): "transformers SchedulerType",
    ("transformers.trainer_utils", "EvaluationStrategy"): "transformers EvaluationStrategy",
    ("transformers.trainer_utils", "FSDPOption"): "transformers FSDPOption",
    ("transformers.training_args", "OptimizerNames"): "transformers OptimizerNames",
    ("transformers.training_args", "ParallelMode"): "transformers ParallelMode",
    ("transformers.debug_utils", "DebugOption"): "transformers DebugOption",
    ("accelerate.utils.dataclasses", "DistributedType"): "accelerate DistributedType",
    ("accelerate.utils.dataclasses", "PrecisionType"): "accelerate PrecisionType",
    ("accelerate.utils.dataclasses", "DynamoBackend"): "accelerate DynamoBackend",
    ("accelerate.utils.dataclasses", "RNGType"): "accelerate RNGType",
    ("accelerate.utils.dataclasses", "ComputeEnvironment"): "accelerate ComputeEnvironment",
    ("deepspeed.runtime.zero.config", "ZeroStageEnum"): "DeepSpeed ZeroStageEnum",
}

# TorchScript's pickle helpers (``torch.jit._pickle``), written into a TorchScript archive's data.pkl.
_TORCHSCRIPT_HELPERS = (
    "build_intlist",
    "build_tensorlist",
    "build_doublelist",
    "build_boollist",
    "build_tensor_from_id",
    "restore_type_tag",
)


def _build() -> dict[tuple[str, str], KnownGlobal]:
    admitted = (*TORCH_DEFAULT_GLOBALS, *TORCH_REGISTERED_GLOBALS, *INERT_BEYOND_TORCH)
    table: dict[tuple[str, str], KnownGlobal] = {pair: KnownGlobal("data") for pair in admitted}
    for pair, what in _CLASSES.items():
        table[pair] = KnownGlobal("class", what)
    for pair, what in _ENUMS.items():
        table[pair] = KnownGlobal("enum", what)
    for module, names in NN_MODULE_CLASSES.items():
        for name in names:
            table[(module, name)] = KnownGlobal("class", f"torch.nn {name} module")
    for name in _TORCHSCRIPT_HELPERS:
        table[("torch.jit._pickle", name)] = KnownGlobal("torchscript", "TorchScript pickle helper")
    return table


#: Every known global, by exact (module, name).
KNOWN_GLOBALS: dict[tuple[str, str], KnownGlobal] = _build()


def classify_global(module: str, name: str) -> KnownGlobal | None:
    """What ``module.name`` is, or None when nothing is known about it (a suspicious global).

    Exact pairs only, plus TorchScript's ``__torch__`` namespace (a class compiled into the archive itself).
    """
    known = KNOWN_GLOBALS.get((module, name))
    if known is not None:
        return known
    if (module == "__torch__" or module.startswith("__torch__.")) and name.isidentifier():
        return KnownGlobal("torchscript", "TorchScript class")
    return None
