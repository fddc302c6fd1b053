"""Stage 1 of the far side: find the interpreter, then read the agent from stdin and start it.

Runs under whatever Python the bootstrap found first (3.7 or newer), from ``python -c BOOT STAGE1 CONFIG``
where STAGE1 is this file zlib-compressed and base64-encoded (the safe alphabet, so it survives any login
shell) and CONFIG is the base64 of a :mod:`marshal`-ed dict: the setting hops and ``--need``. Standard library
only, and only built-in modules on the common path (``re``, which ``base64`` and ``json`` import, costs a run
several milliseconds).

1. Say hello (the magic line and an ``H`` frame) at once. The local side writes nothing to stdin before it: a
   login script that reads stdin would otherwise eat the frames (or a shell that an rc file ``exec``-s would
   run them as commands).
2. Choose the interpreter: ``python=``/``venv=``/``conda=`` if given, else the first candidate of the
   discovery order (``$VIRTUAL_ENV``, ``$CONDA_PREFIX``, venvs under the login user's home, ``/opt``, conda
   envs, interpreters of the login user's running Python processes, ``python3``/``python`` on PATH); with
   ``need`` the first whose ``find_spec`` finds every module. A venv or conda env found by looking around
   must belong to the login user or root and be writable by no one else (its root, ``bin``, ``pyvenv.cfg``,
   ``lib`` and site-packages, and the interpreter it runs): another local user's ``.pth`` file would
   otherwise run as whoever connects. Other users' homes are never searched (name their venv with
   ``venv=``). If the choice is not this interpreter, ``exec`` it with the same stage 1 (nothing has been
   read from stdin yet).
3. Read exactly one frame (the agent's source, kind ``A``) with ``os.read`` loops, which never read ahead into
   a buffer, check its kind and size (a wrong one means the stream was corrupted) and run it.
"""

from __future__ import annotations

import binascii
import marshal
import os
import sys
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

MAGIC = b"\n\x00TRAINPROBE-AGENT-1\x00"
#: in the command line of every trainprobe agent (the bootstrap); other runs' agents are not candidates
OUR_BOOT = b"zlib.decompress(binascii.a2b_base64(sys.argv[1]))"
NEED_CHECK = "import importlib.util as u,sys;print(sys.version.split()[0]);print(','.join(n for n in sys.argv[1:] if u.find_spec(n) is None))"  # noqa: E501
HOME_VENV_DIRS = ("envs", "venvs", ".venvs", ".virtualenvs", ".pyenv/versions")
CONDA_DIRS = ("miniconda3", "anaconda3", "miniforge3", "mambaforge", ".conda", "conda")
#: the agent's compressed source is a few kB; a header claiming more means the stream is not ours
MAX_AGENT_BYTES = 1 << 22
UID = os.getuid()


def write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def read_exact(n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(0, min(n, 1 << 20))
        if not chunk:
            raise EOFError("stdin closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def trusted(path: str) -> bool:
    """``path`` exists, belongs to the login user or root, and no one else may write to it."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid in (UID, 0) and not st.st_mode & 0o022


def trusted_env(root: str, python: str) -> bool:
    """A venv or conda env that only the login user or root can have planted code in."""
    parts = [root, os.path.join(root, "bin"), os.path.realpath(python)]
    if os.path.exists(os.path.join(root, "pyvenv.cfg")):
        parts.append(os.path.join(root, "pyvenv.cfg"))
    lib = os.path.join(root, "lib")
    try:
        versions = [os.path.join(lib, name) for name in os.listdir(lib) if name.startswith("python")]
    except OSError:
        versions = []
    parts += [lib] if versions else []
    for version in versions:
        parts.append(version)
        if os.path.isdir(os.path.join(version, "site-packages")):
            parts.append(os.path.join(version, "site-packages"))
    return all(trusted(part) for part in parts)


def env_root(python: str) -> str:
    """The venv or conda env an interpreter path starts in (``ROOT/bin/python``), or "" for none."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    marker = ("pyvenv.cfg", "conda-meta")
    return root if any(os.path.exists(os.path.join(root, m)) for m in marker) else ""


def venvs_under(root: str) -> list[str]:
    """``*/pyvenv.cfg`` one level down, plus ``.venv``/``venv`` in each project and the usual env folders."""
    found: list[str] = []
    try:
        names = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    except OSError:
        return found
    for name in names:
        for sub in ("", ".venv", "venv"):
            found.append(os.path.join(root, name, sub))
    for name in HOME_VENV_DIRS:
        try:  # noqa: SIM105  (far side: no contextlib import)
            found.extend(sorted(entry.path for entry in os.scandir(os.path.join(root, name))))
        except OSError:
            pass
    return [os.path.join(d, "bin", "python") for d in found if os.path.isfile(os.path.join(d, "pyvenv.cfg"))]


def conda_bases(homes: list[str]) -> list[str]:
    bases = [os.path.join(h, d) for h in homes for d in CONDA_DIRS] + ["/opt/" + d for d in CONDA_DIRS]
    return [b for b in bases if os.path.isdir(os.path.join(b, "conda-meta"))]


def conda_envs(homes: list[str]) -> list[str]:
    found = []
    for base in conda_bases(homes):
        found.append(os.path.join(base, "bin", "python"))
        try:  # noqa: SIM105  (far side: no contextlib import)
            found.extend(sorted(os.path.join(e.path, "bin", "python") for e in os.scandir(base + "/envs")))
        except OSError:
            pass
    return found


def running_pythons() -> list[str]:
    """Interpreters of the login user's running Python processes: argv[0] if absolute (keeps venv paths),
    else the executable. Other users' processes are not candidates (their interpreters are theirs)."""
    found: list[str] = []
    me = str(os.getpid())
    try:
        pids = sorted((p for p in os.listdir("/proc") if p.isdigit() and p != me), key=int)
    except OSError:
        return found
    for pid in pids:
        try:
            if os.stat("/proc/" + pid).st_uid != UID:
                continue
            exe = os.readlink("/proc/" + pid + "/exe")
            with open("/proc/" + pid + "/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if not os.path.basename(exe).startswith("python") or OUR_BOOT in b"".join(argv[:3]):
            continue
        first = argv[0].decode(errors="replace")
        found.append(first if first.startswith("/") and os.path.basename(first).startswith("python") else exe)
    return found


def candidate_groups() -> Iterator[tuple[list[str], bool]]:
    """(candidates, whether each must pass :func:`trusted_env`) in discovery order, group by group, so a
    caller that needs only the first stops early. The environment and PATH are the login user's own
    choice; what is found by looking around the file system is checked."""
    env = os.environ
    yield (
        [os.path.join(env[var], "bin", "python") for var in ("VIRTUAL_ENV", "CONDA_PREFIX") if env.get(var)],
        False,
    )
    home = os.path.expanduser("~")
    yield venvs_under(home), True
    yield venvs_under("/opt"), True
    yield conda_envs([home]), True
    yield running_pythons(), True
    yield [path for path in (which("python3"), which("python")) if path], False


def identity(path: str) -> tuple[str, str]:
    """What makes two paths one interpreter: the file with symlinks resolved (``/usr/bin/python3`` is
    ``/usr/bin/python3.11``) and the venv the path starts it in (a venv's ``bin/python`` links to the system
    Python, but started through the venv it sees the venv's packages, so it stays a candidate of its own)."""
    path = os.path.abspath(path)
    bindir = os.path.dirname(path)
    venv = ""
    for directory in (bindir, os.path.dirname(bindir)):
        if os.path.isfile(os.path.join(directory, "pyvenv.cfg")):
            venv = directory
            break
    return os.path.realpath(path), venv


def acceptable(path: str, checked: bool) -> bool:
    if not executable(path):
        return False
    if not checked:
        return True
    root = env_root(path)
    return trusted_env(root, path) if root else trusted(os.path.realpath(path))


def iter_candidates() -> Iterator[str]:
    seen = set()
    for group, checked in candidate_groups():
        for path in group:
            path = os.path.abspath(path)
            key = identity(path)
            if key in seen or not acceptable(path, checked):
                continue
            seen.add(key)
            yield path


def discovery_order() -> list[str]:
    """Every candidate interpreter, first choice first (``trainprobe probe`` lists them)."""
    return list(iter_candidates())


def which(name: str) -> str:
    """shutil.which without importing shutil (startup time counts on every run)."""
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(directory or ".", name)
        if executable(path):
            return path
    return ""


def conda_python(name: str) -> str:
    if "/" in name:
        return os.path.join(name, "bin", "python")
    for base in conda_bases([os.path.expanduser("~")]):
        if name == "base":
            return os.path.join(base, "bin", "python")
        path = os.path.join(base, "envs", name, "bin", "python")
        if executable(path):
            return path
    return ""


def missing_modules(python: str, need: list[str]) -> tuple[str, list[str]]:
    """(version, modules not found) for one candidate, asked in a subprocess; ("", [why]) if it fails."""
    import subprocess  # only here: importing it costs every run a few milliseconds

    try:
        proc = subprocess.run(
            [python, "-c", NEED_CHECK, *need], stdin=subprocess.DEVNULL, capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", ["(did not run: " + str(exc) + ")"]
    lines = proc.stdout.decode(errors="replace").splitlines()
    if proc.returncode or len(lines) < 2:
        return "", ["(did not run: exit " + str(proc.returncode) + ")"]
    return lines[0], [m for m in lines[1].split(",") if m]


def choose(cfg: dict) -> str:  # type: ignore[type-arg]
    need = cfg.get("need") or []
    if cfg.get("python") or cfg.get("venv") or cfg.get("conda"):
        if cfg.get("python"):
            path, what = cfg["python"], "python=" + cfg["python"]
        elif cfg.get("venv"):
            path, what = os.path.join(cfg["venv"], "bin", "python"), "venv=" + cfg["venv"]
        else:
            path, what = conda_python(cfg["conda"]), "conda=" + cfg["conda"]
        if not path or not executable(path):
            fail(what + " has no Python interpreter" + (" at " + path if path else ""), [])
        candidates: Iterable[str] = [path]
    else:
        candidates = iter_candidates()
        if not need:
            first = next(iter(candidates), None)
            if first is None:
                fail(
                    "no Python interpreter found (no venv, conda env, running Python or python3 in PATH)", []
                )
            return str(first)
    if not need:
        return next(iter(candidates))
    tried = []
    for path in candidates:
        version, missing = missing_modules(path, need)
        if not missing:
            return path
        tried.append({"python": path, "version": version, "missing": missing})
    fail("no interpreter has " + ", ".join(need), tried)
    raise AssertionError


def fail(message: str, tried: list, error: str = "interpreter", code: int = 127) -> None:  # type: ignore[type-arg]
    import json  # only on this path: json imports re

    data = json.dumps({"error": error, "message": message, "tried": tried}).encode()
    write_all(b"F" + len(data).to_bytes(4, "big") + data)
    os._exit(code)


def main() -> None:
    cfg = marshal.loads(binascii.a2b_base64(sys.argv[2]))
    if not cfg.get("chosen"):
        write_all(MAGIC + b"H\0\0\0\0")
        python = choose(cfg)
        if identity(python) != identity(sys.executable):  # exec only a different interpreter
            cfg["chosen"] = True
            encoded = binascii.b2a_base64(marshal.dumps(cfg, 4), newline=False).decode()
            os.execv(python, [python, "-c", cfg["boot"], sys.argv[1], encoded])
    try:
        header = read_exact(5)
        size = int.from_bytes(header[1:], "big")
        if header[:1] != b"A" or size > MAX_AGENT_BYTES:
            fail("the stream from the local side was corrupted before the agent started (a login script "
                 "read stdin?)", [], "corrupt", 2)  # fmt: skip
        source = read_exact(size)
    except EOFError:  # the local side gave up (connect timeout, Ctrl-C) before sending the agent
        os._exit(1)
    namespace = {"__name__": "trainprobe_agent"}
    exec(compile(zlib.decompress(source), "<trainprobe-agent>", "exec"), namespace)
    namespace["serve"](cfg)  # type: ignore[operator]
    # Everything went out with os.write and the exit report is sent: skip the interpreter's shutdown, which
    # the local side (and ssh) would otherwise wait for on every run.
    os._exit(0)


if __name__ == "__main__":  # under python -c; shipped as a module by probe, it only offers discovery
    main()
