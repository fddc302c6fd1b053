"""trainprobe: debug ML training runs at a distance.

Subpackages, one per capability:

- ``trainprobe.checkpoint``: read checkpoints without torch and without executing them; ``scan``, ``check``,
  ``diff``.
- ``trainprobe.remote``: run Python on a target reached through a chain of hops (ssh, containers, venvs).
- ``trainprobe.metrics``: read training logs and find spikes, cliffs, stalls and non-finite values.
- ``trainprobe.save``: a checkpoint writer that snapshots consistently and writes atomically.

``trainprobe.cli`` is a thin command-line layer over these.
"""

from trainprobe.errors import TrainprobeError

__version__ = "0.1.0"

__all__ = ["TrainprobeError", "__version__"]
