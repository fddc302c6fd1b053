"""`trainprobe logs`."""
