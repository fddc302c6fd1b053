"""Shared pytest configuration. Fixtures for real components live beside the tests that use them
(tests/remote/conftest.py starts the loopback sshd, and so on)."""
