"""Every registry of pluggable pieces as one table of rows: a piece (a log reader, a checkpoint format, a
framework's layout, an optimizer family) is one module holding one class, and its registry one row here,
``"module:Class"`` (under the package that loads it) -> what the piece reads, as the command help lists it.
Adding a piece is its file and its row; the help texts (``logs``, ``scan``, ``check``) are built from these
rows without importing a piece (:func:`help_list`), and a registry's order is the order of its rows.

Standard library only, and nothing imported: shipped to the far side with :mod:`trainprobe.errors`, read by
``--help`` before numpy. (Hop kinds have their table in :mod:`trainprobe.remote.hops`, MCP tools theirs in
:mod:`trainprobe.mcp.tools`: each beside the one engine that runs them.)
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported on the way to `--help`
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

#: log file readers (:mod:`trainprobe.metrics.readers`), tried in this order on a file's first bytes; the text
#: reader, last, takes anything that is not binary
LOG_READERS: dict[str, str] = {
    "tensorboard:TensorBoardReader": "TensorBoard event files",
    "wandb_records:WandbRecordsReader": "W&B run files (.wandb)",
    "trainer_state:TrainerStateReader": "HF trainer_state.json",
    "megatron_golden:MegatronGoldenReader": "Megatron golden values",
    "detectron2:Detectron2Reader": "detectron2 metrics.json",
    "mmengine:MmengineReader": "MMEngine scalars.json",
    "jsonl:JsonlReader": "JSONL",
    "csv_layouts:KerasCsvReader": "Keras CSVLogger files",
    "csv_layouts:UltralyticsReader": "Ultralytics results.csv",
    "csv_layouts:TimmSummaryReader": "timm summary.csv",
    "yolo_results:YoloResultsReader": "YOLO results.txt",
    "csv:CsvReader": "CSV/TSV (Lightning metrics.csv, W&B exports)",
    "text:TextReader": "plain-text logs (llm.c, Megatron, `step 10 | loss 2.3`, `key=value` ...)",
}

#: readers of a whole run directory (:mod:`trainprobe.metrics.readers`), asked before its files one by one
RUN_DIR_READERS: dict[str, str] = {
    "wandb_dir:WandbDirReader": "W&B run directories",
    "mlflow:MlflowReader": "MLflow runs",
}

#: checkpoint formats (:mod:`trainprobe.checkpoint.reading.formats`), asked in this order, more specific first
CHECKPOINT_FORMATS: dict[str, str] = {
    "dcp:DcpFormat": "torch.distributed.checkpoint directories",
    "hf_sharded:HfShardedFormat": "Hugging Face sharded checkpoints (*.index.json)",
    "torch_zip:TorchZipFormat": "torch zip (.pt/.pth/.bin/.ckpt: plain, Lightning, DeepSpeed)",
    "torch_legacy:TorchLegacyFormat": "legacy torch files",
    "safetensors:SafetensorsFormat": "safetensors",
    "pickle_file:TorchTarFormat": "torch tar archives",
    # last: a safetensors header length can begin with the bytes of a pickle PROTO opcode
    "pickle_file:BarePickleFormat": "pickles",
}

#: frameworks' layouts (:mod:`trainprobe.checkpoint.units.frameworks`): directories asked in this order (more
#: specific first); a single file's object is claimed by the first framework that knows it
FRAMEWORKS: dict[str, str] = {
    "dcp:Dcp": "a DCP directory",
    "hf_trainer:HfTrainer": "HF Trainer checkpoint-N/",
    "accelerate:Accelerate": "accelerate save_state",
    "deepspeed:DeepSpeed": "DeepSpeed global_stepN/",
    "lightning:Lightning": "Lightning .ckpt",
    "folder:Folder": "a step folder of model + optimizer files",
    "folder:PlainFile": "",  # a file no framework claims: no layout to list
}

#: optimizer families (:mod:`trainprobe.checkpoint.check.optimizers`): a parameter's state is the first
#: family's that matches its keys, more specific first
OPTIMIZER_FAMILIES: dict[str, str] = {
    "bnb8bit:Bnb8bit": "8-bit",
    "adafactor:Adafactor": "Adafactor",
    "adam:Adam": "Adam",
    "adamax:Adamax": "Adamax",
    "lion:Lion": "Lion",
    "rmsprop:RmsProp": "RMSprop",
    "adagrad:Adagrad": "Adagrad",
    "sgd:Sgd": "SGD",
}


def class_named(package: str, row: str) -> Any:
    """The class a ``"module:Class"`` row names, ``module`` under ``package`` (imported now)."""
    import importlib

    module, _, name = row.partition(":")
    return getattr(importlib.import_module(f"{package}.{module}"), name)


def instances(
    package: str, rows: Iterable[str], arguments: Mapping[str, tuple[Any, ...]] | None = None
) -> tuple[Any, ...]:
    """One instance of each class ``rows`` name (see :func:`class_named`), in the rows' order; ``arguments``
    hands a class what it must not import itself (the HF index reader: the registry's ``open_file``)."""
    given = arguments or {}
    return tuple(class_named(package, row)(*given.get(row, ())) for row in rows)


def help_list(table: Mapping[str, str]) -> str:
    """What a table's pieces read, as one phrase for a help text: ``a, b and c`` (a row without words is no
    kind of input a user names, such as the framework of a plain file, and is left out)."""
    words = [what for what in table.values() if what]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


__all__ = [
    "CHECKPOINT_FORMATS",
    "FRAMEWORKS",
    "LOG_READERS",
    "OPTIMIZER_FAMILIES",
    "RUN_DIR_READERS",
    "class_named",
    "help_list",
    "instances",
]
