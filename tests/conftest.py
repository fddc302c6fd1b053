"""Shared pytest configuration. Fixtures for real components live in tests/fixtures/ and are registered here
so any
test directory can use them (``sshd``, ``ssh_setup``: a real OpenSSH server on loopback)."""

pytest_plugins = ["fixtures.sshd"]
