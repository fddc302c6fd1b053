"""`trainprobe diff`."""
