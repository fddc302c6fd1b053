"""Code for the far side: code objects when the far Python's bytecode matches this one's, else source.

Compiling is the biggest part of a far-side start that is not Python's own (the discovery and the agent on
every run; ``trainprobe.checkpoint``, 150 kB of source, on every ``scan --on``). Stage 1's hello says the far
interpreter's bytecode magic number; when it is this interpreter's, the code goes as a marshal-ed code object,
taken from the module's fresh ``.pyc`` (an installed package has them) or compiled here once per process.
"""

from __future__ import annotations

import marshal
import os
import sys
import zlib

#: importlib's frozen core: the bytecode magic number and the .pyc location, without importing importlib.util
_BOOTSTRAP = sys.modules["_frozen_importlib_external"]
#: this interpreter's bytecode magic number: code compiled here runs on a far Python that says the same
LOCAL_MAGIC: bytes = _BOOTSTRAP.MAGIC_NUMBER
_HERE = os.path.dirname(os.path.abspath(__file__))
_programs: dict[str, tuple[bytes, bytes]] = {}
_codes: dict[tuple[str, int], bytes] = {}


def _compiled(path: str) -> tuple[bytes, bytes]:
    """(marshal-ed code, source) of a far-side module: the code from its fresh ``.pyc`` when there is one
    (an installed package has them), else compiled here once per process and the ``.pyc`` written if it can
    be."""
    with open(path, "rb") as f:
        source = f.read()
    st = os.stat(path)
    header = LOCAL_MAGIC + b"\0\0\0\0" + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
    header += (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    cached = _BOOTSTRAP.cache_from_source(path)
    try:
        with open(cached, "rb") as f:
            data = f.read()
        if data[:16] == header:
            return data[16:], source
    except OSError:
        pass
    code = marshal.dumps(compile(source, path, "exec", dont_inherit=True))
    if not sys.dont_write_bytecode:
        try:  # as py_compile does: a temporary file renamed into place
            os.makedirs(os.path.dirname(cached), exist_ok=True)
            temporary = f"{cached}.{os.getpid()}.tmp"
            with open(temporary, "wb") as f:
                f.write(header + code)
            os.replace(temporary, cached)
        except OSError:
            pass
    return code, source


def program_frame(module: str, far_magic: bytes, *, with_source: bool) -> bytes:
    """The payload of a ``D`` or ``A`` frame for the far-side module ``module`` (``_discovery`` or ``agent``):
    ``magic codelen zlib(code) zlib(source)``. The code goes when the far Python's bytecode magic number is
    this one's; the source when it is not, or when ``with_source`` (an interpreter that stage 1 ``exec``-s
    may be another version)."""
    if module not in _programs:
        code, source = _compiled(os.path.join(_HERE, module + ".py"))
        _programs[module] = (zlib.compress(code, 6), zlib.compress(source, 9))
    code, source = _programs[module]
    if far_magic != LOCAL_MAGIC:
        code = b""
    if code and not with_source:
        source = b""
    return LOCAL_MAGIC + len(code).to_bytes(4, "big") + code + source


def module_code(filename: str, source: bytes) -> bytes:
    """``source`` (shipped as ``filename``) compiled for this interpreter, marshal-ed: from the file's fresh
    ``.pyc`` when ``filename`` is that file, else compiled here (once per process)."""
    key = (filename, hash(source))
    if key not in _codes:
        code = b""
        try:
            if os.path.getsize(filename) == len(source):
                cached, file_source = _compiled(filename)
                code = cached if file_source == source else b""
        except OSError:
            pass
        _codes[key] = code or marshal.dumps(compile(source, filename, "exec", dont_inherit=True))
    return _codes[key]
