"""Shared pytest configuration.

Fixtures for real components live in tests/fixtures/, registered here so any test directory can use them:
``sshd`` and ``ssh_setup`` (a real OpenSSH server on loopback with bash/zsh/fish/dash/tcsh users) and
``numpy_venv`` (a system-Python venv with numpy and without trainprobe), ``framework_units`` (checkpoints
written by the real frameworks, cached per framework versions: tests/fixtures/frameworks/plugin.py).
"""

pytest_plugins = ["fixtures.sshd", "fixtures.venvs", "fixtures.frameworks.plugin"]
