"""Scripts and arguments that break naive quoting, shared by the local and ssh tests."""

from __future__ import annotations

import hashlib

# Every character a shell might interpret, in an argument that must arrive byte-identical.
NASTY_ARGS = [
    "plain",
    "",
    " leading and trailing ",
    "'single' \"double\" `back` $HOME ${HOME} $(id) !! !$ \\ \\\\ \\n",
    "*?[abc]{a,b}~ # ; & | && || < > >> 2>&1 ( ) %1 ^ =",
    "line one\nline two\ttab\r",
    "EOF",
    "non-ASCII: é ü 中文 🚀",
    "--flag=value",
    "-",
]

TRICKY_SCRIPT = r'''#!/usr/bin/env python3
# What breaks quoting: 'single', "double", `backticks`, $VARS, !history, {braces}, \back\slashes
import json
import sys

name = "wörld"
braces = {"a": {"b": [1, 2, 3]}}
print(f"hello {name}! {{literal braces}} {braces['a']['b'][1]} $HOME `id` !! \\n")
print('it\'s "quoted"')
print("""EOF
EOF
'EOF'
""".strip())
print(json.dumps(sys.argv[1:]))


def main():
    return {"argv": sys.argv[1:], "name": name, "emoji": "🚀"}
'''

TRICKY_STDOUT_START = "hello wörld! {literal braces} 2 $HOME `id` !! \\n\nit's \"quoted\"\nEOF\nEOF\n'EOF'\n"

BIG_OUTPUT = """
import hashlib, sys
block = bytes(range(256)) * 4096  # 1 MiB, every byte value, not UTF-8
digest = hashlib.sha256()
for i in range(int(sys.argv[1])):
    sys.stdout.buffer.write(block)
    digest.update(block)
sys.stdout.buffer.flush()
sys.stderr.write(digest.hexdigest() + "\\n")
"""


def big_output_digest(mib: int) -> str:
    block = bytes(range(256)) * 4096
    digest = hashlib.sha256()
    for _ in range(mib):
        digest.update(block)
    return digest.hexdigest()


SLEEPER = """
import os, subprocess, sys, time
child = subprocess.Popen(["sleep", "300"])
print(os.getpid(), child.pid, flush=True)
time.sleep(300)  # runs until the test kills it
"""
