"""`trainprobe watch`."""
