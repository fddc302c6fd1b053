"""Stage two of ``trainprobe.checkpoint``: what a checkpoint *is* beyond its bytes.

- :mod:`.discover`: paths (files, directories, globs) become units, each one checkpoint;
- :mod:`.frameworks`: one module per framework (its layouts, what its step sources count, its own evidence);
- :mod:`.open`: a unit's part opened for reading, with its framework and role;
- :mod:`.roles`: each tensor's role (weights, optimizer state, metadata);
- :mod:`.steps`: which step a unit holds, from every place that says so, and whether they agree;
- :mod:`.manifest`: the CheckpointWriter manifest beside a checkpoint.
"""
