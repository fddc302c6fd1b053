"""Stage one of ``trainprobe.checkpoint``: a file or directory read into a :class:`~.base.Checkpoint` (its
skeleton object and a lazy :class:`~.base.TensorRecord` per tensor), without torch and without running it.

- :mod:`.base`: the Checkpoint, its tensor records and the reader limits; :mod:`.dtypes`: element types;
  :mod:`.mapping`: files as read-only memory maps;
- :mod:`.formats`: one reader per format behind :class:`~.base.CheckpointFormat`, and detection;
- :mod:`.pickle`: the restricted unpickler, its inert placeholders and torch rebuild stand-ins, and the one
  rule for what a pickle global is;
- :mod:`.zipcheck`: a zip archive's structure and CRCs; :mod:`.walk` and :mod:`.naming`: tensor names in the
  skeleton, optimizer state by parameter; :mod:`.skeleton`: what the skeleton says (optimizer states,
  scalars); :mod:`.parts`: the data files of a multi-file part and a share of one.

Nothing here knows units, frameworks or verdicts (those are :mod:`trainprobe.checkpoint.units`
and above).
"""
