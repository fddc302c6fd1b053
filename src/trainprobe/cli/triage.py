"""`trainprobe triage`."""
