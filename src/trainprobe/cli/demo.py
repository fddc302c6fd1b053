"""`trainprobe demo`."""
