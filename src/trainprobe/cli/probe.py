"""`trainprobe probe`."""
