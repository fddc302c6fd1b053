"""The ``manifest`` evidence: a CheckpointWriter manifest beside the file agrees with it (size, sha256, file
name, step). The manifest itself is defined in :mod:`trainprobe.checkpoint.units.manifest`."""

from __future__ import annotations

from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.reading.base import Checkpoint
from trainprobe.checkpoint.units.facts import step_field
from trainprobe.checkpoint.units.manifest import manifest_problems, read_manifest


def check_manifest(ckpt: Checkpoint, ev: list[Evidence]) -> int | None:
    """Validate a CheckpointWriter manifest beside the file; returns the manifest's step."""
    try:
        manifest = read_manifest(ckpt.path)
    except ValueError as exc:
        ev.append(Evidence("manifest", "fail", str(exc), indicates="corrupt"))
        return None
    if manifest is None:
        return None
    found = step_field(ckpt.objects)
    problems = manifest_problems(ckpt.path, manifest, found[1] if found else None)
    if problems:
        ev.append(Evidence("manifest", "fail", "manifest: " + "; ".join(problems), indicates="corrupt"))
    else:
        ev.append(
            Evidence(
                "manifest",
                "pass",
                f"CheckpointWriter manifest matches (step {manifest.step}, sha256 {manifest.sha256[:12]}…)",
                values={"decisive": True, "step": manifest.step},
            )
        )
    return manifest.step
