"""`trainprobe check`."""
