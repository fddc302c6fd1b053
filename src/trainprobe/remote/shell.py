"""The safe alphabet: argv words that every login shell reads literally inside single quotes.

An ssh hop sends its remote command as one string, the words joined with spaces; the remote login shell
parses it.
Each word goes inside single quotes. Inside single quotes sh, dash, bash and zsh treat everything literally
except
``'``; fish also treats ``\\`` specially; csh and tcsh also expand ``!`` and end the command at a newline. So
a word
may hold printable ASCII except ``'``, ``\\`` and ``!``. Everything else (scripts, arguments, modules)
travels over
stdin and never meets a shell.
"""

from __future__ import annotations

from collections.abc import Iterable

from trainprobe.errors import TargetSyntaxError

FORBIDDEN = frozenset("'\\!")


def unsafe_characters(word: str) -> list[str]:
    """The characters of ``word`` outside the safe alphabet, in order of appearance, each once."""
    if word.isascii() and word.isprintable() and "'" not in word and "\\" not in word and "!" not in word:
        return []  # the common case, without a Python loop over a 5 kB bootstrap word
    bad: list[str] = []
    for ch in word:
        if (ch in FORBIDDEN or not (" " <= ch <= "~")) and ch not in bad:
            bad.append(ch)
    return bad


def check_word(word: str, what: str, *, target: str = "") -> str:
    """``word`` if it is safe, else a TargetSyntaxError naming ``what`` and the offending characters."""
    bad = unsafe_characters(word)
    if bad:
        shown = ", ".join(repr(ch) for ch in bad)
        raise TargetSyntaxError(
            target,
            f"{what} {word!r} contains {shown}, which some login shells do not pass through literally",
            hint="use printable ASCII without quote, backslash or '!' (a symlink without them works)",
        )
    return word


def quote(word: str) -> str:
    """One word in single quotes; ``word`` must already be in the safe alphabet."""
    check_word(word, "argument")
    return f"'{word}'"


def join(argv: Iterable[str]) -> str:
    """The command line a login shell splits back into exactly ``argv``."""
    return " ".join(quote(word) for word in argv)
