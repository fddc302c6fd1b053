"""Why a run failed before the agent started, from what the tools said: each hop explains its own tool's
words, the line quoted is the one that says it (not merely the last), and the exit code follows."""

from __future__ import annotations

import pytest

from trainprobe.errors import AuthenticationError, InterpreterNotFoundError, RemoteError, UnreachableError
from trainprobe.remote import parse_target
from trainprobe.remote.run_errors import explain_transport

LOCALE = "bash: warning: setlocale: LC_ALL: cannot change locale (xx)\n"
REFUSED = "ssh: connect to host h port 1: Connection refused"
CHANGED = "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nHost key verification failed.\n"
NOLOGIN = "This account is currently not available."
STALE = "Control socket connect(/tmp/x): Connection refused\n"
FATAL = "Fatal Python error: init_fs_encoding: failed to get the Python codec\n<no Python frame>\n"

CASES = [
    # (target, transport log, exit status, error type, words in the message, exit code)
    ("ssh=u@h", "u@h: Permission denied (publickey).\n", 255, AuthenticationError,
     "authentication refused: u@h: Permission denied (publickey).", 255),
    ("ssh=h:1", REFUSED + "\n" + LOCALE, 255, UnreachableError, "unreachable: " + REFUSED, 255),
    ("ssh=h", CHANGED, 255, AuthenticationError,
     "host key verification failed: Host key verification failed.", 255),
    ("ssh=nologin@h", NOLOGIN + "\n", 1, AuthenticationError,
     "nologin has no login shell there (nologin): " + NOLOGIN, 255),
    # the reason is the line before the last, and the exit status is sudo's
    ("ssh=h//sudo=ghost", "sudo: unknown user ghost\nsudo: error initializing audit plugin sudoers_audit\n",
     1, AuthenticationError, "sudo: there is no user ghost there (sudo: unknown user ghost)", 255),
    ("ssh=h//sudo", "sudo: a password is required\n", 1, AuthenticationError, "a password is required", 255),
    ("ssh=h//sudo", "bash: line 1: sudo: command not found\n", 127, UnreachableError,
     "sudo is not installed on the far side", 127),
    ("ssh=h//docker=t", "zsh:1: command not found: docker\nbash: docker: command not found\n", 127,
     UnreachableError, "docker is not installed where this hop runs", 127),
    ("ssh=h//kubectl=p", "sh: 1: kubectl: not found\n", 127, UnreachableError, "kubectl is not installed",
     127),
    # ssh's own words count only when ssh itself failed (255): here the far side's Python is missing
    ("ssh=h", STALE + "trainprobe: no python3 or python on PATH\n", 127, InterpreterNotFoundError,
     "no python3 or python on the far side's PATH", 127),
    ("ssh=h//python=/opt/py", "zsh:1: no such file or directory: /opt/py\n", 127, InterpreterNotFoundError,
     "no Python interpreter on the far side: zsh:1: no such file or directory: /opt/py", 127),
    ("ssh=h", FATAL, 1, InterpreterNotFoundError, "does not start: Fatal Python error: init_fs_encoding",
     127),
    ("ssh=h", "  File \"<string>\", line 1\nSyntaxError: invalid syntax\n", 1, InterpreterNotFoundError,
     "too old for trainprobe's agent", 127),
    # binary garbage last: the last printable line is quoted, control bytes escaped
    ("ssh=h", "forced command: maintenance\n\x00\x01\x02\n", 3, RemoteError,
     "the far side exited with 3 before the agent started: \\x00\\x01\\x02", 255),
]  # fmt: skip


@pytest.mark.parametrize(("target", "log", "status", "kind", "words", "code"), CASES)
def test_the_hop_that_knows_explains(
    target: str, log: str, status: int, kind: type[RemoteError], words: str, code: int
) -> None:
    error, exit_code = explain_transport(parse_target(target), status, log)
    assert type(error) is kind, error
    assert words in str(error)
    assert error.hint
    assert exit_code == code


def test_the_last_printable_line_is_quoted_not_the_noise() -> None:
    error, code = explain_transport(parse_target("ssh=h"), 1, "motd line\nbroken rc: exit\n" + LOCALE)
    assert "the far side exited with 1 before the agent started: broken rc: exit" in str(error)
    assert "ForceCommand" in (error.hint or "")
    assert code == 255
