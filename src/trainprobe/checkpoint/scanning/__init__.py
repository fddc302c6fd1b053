"""``scan``: NaN/Inf in checkpoints, one verdict per unit. :mod:`.run` reads every part of every unit and
checks its tensors; :mod:`.judge` turns a unit's part reads into its verdict and evidence (also for a unit
read in shares on several machines); :mod:`.report` is the documented, versioned JSON report. The entry point
is :func:`trainprobe.checkpoint.scan` (``trainprobe.checkpoint.scanning.run.scan``): the package is not named
``scan`` so that the function keeps that name on the face."""
