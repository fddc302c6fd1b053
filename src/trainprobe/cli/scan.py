"""`trainprobe scan`."""
