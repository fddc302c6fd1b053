"""`trainprobe run`."""
