"""A checkpoint unit read where its files are, on several machines (``scan|check --on FLEET --sharded
PATH``): the far side's calls (:mod:`.inventory`, then :mod:`.scan_share` or :mod:`.check_share`), who reads
which file (:mod:`.plan`) and the one report from what each read (:mod:`.merge`). The plan and the merge are
pure; :mod:`trainprobe.tasks.sharded` runs the calls."""
