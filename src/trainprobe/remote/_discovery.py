"""Interpreter discovery on the far side: which Python runs the agent.

Sent by the local side as the ``D`` frame, after stage 1's hello: :mod:`trainprobe.remote._stage1` runs
:func:`start`, which ``exec``-s the chosen interpreter when it is not the one running (``trainprobe probe``
ships this module to list the discovery order). Standard library only, Python 3.7 or newer, only built-in
modules on the common path (``re``, which ``base64`` and ``json`` import, costs a run several milliseconds),
and no ``from __future__`` import (that is an import too): annotations that Python 3.7 cannot evaluate are
strings.

:func:`choose` takes ``python=``/``venv=``/``conda=`` if given, else the first candidate of the discovery
order (``$VIRTUAL_ENV``, ``$CONDA_PREFIX``, venvs under the login user's home, ``/opt``, conda envs,
interpreters of the login user's running Python processes, ``python3``/``python`` on PATH); with ``need`` the
first whose ``find_spec`` finds every module. A venv or conda env found by looking around must belong to the
login user or root and be writable by no one else (its root, ``bin``, ``pyvenv.cfg``, ``lib`` and
site-packages, and the interpreter it runs): another local user's ``.pth`` file would otherwise run as whoever
connects. Other users' homes are never searched (name their venv with ``venv=``); other users' running
Pythons are not candidates.

The far side's one notion of home lives here too (:func:`home`, :func:`expand_home`): discovery searches it,
``python=``/``venv=``/``conda=`` expand ``~`` and ``$HOME`` with it, and the forked script gets this module
(shipped as ``trainprobe_discovery``) for ``cd=`` and the path arguments of ``scan``/``check``/``diff``/
``logs``/``triage``/``watch`` ``--on``. Paths never meet a shell; the expansion is this Python's.
"""

import binascii
import marshal
import os
import pwd
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

#: in the command line of every trainprobe agent (the bootstrap); other runs' agents are not candidates
OUR_BOOT = b"zlib.decompress(binascii.a2b_base64(sys.argv[1]))"
NEED_CHECK = "import importlib.util as u,sys;print(sys.version.split()[0]);print(','.join(n for n in sys.argv[1:] if u.find_spec(n) is None))"  # noqa: E501
HOME_VENV_DIRS = ("envs", "venvs", ".venvs", ".virtualenvs", ".pyenv/versions")
CONDA_DIRS = ("miniconda3", "anaconda3", "miniforge3", "mambaforge", ".conda", "conda")
UID = os.getuid()


#: the words that name the home of the user the code runs as, at the start of a path, alone or before a ``/``
HOME_WORDS = ("~", "$HOME", "${HOME}")


def home() -> str:
    """The home directory of the user this process runs as (after a ``sudo`` hop or in a container, that
    user's, whatever ``HOME`` it inherited): its passwd entry, else ``$HOME`` (a container user without one),
    else ""."""
    try:
        return pwd.getpwuid(UID).pw_dir or os.environ.get("HOME", "")
    except KeyError:
        return os.environ.get("HOME", "")


def names_home(path: str) -> bool:
    """``path`` starts with ``~`` (``~``, ``~/x``, ``~user/x``), ``$HOME`` or ``${HOME}``: only the far side
    knows what it is (the local side asks this to keep such a path out of the command line)."""
    return path.startswith("~") or any(path == w or path.startswith(w + "/") for w in HOME_WORDS[1:])


def expand_home(path: str) -> str:
    """``path`` with its leading ``~``, ``$HOME`` or ``${HOME}`` (alone or before ``/``) replaced by
    :func:`home`, and ``~user`` by that user's home (``os.path.expanduser``); every other path, and one whose
    home is unknown, as given."""
    for word in HOME_WORDS:
        if path == word or path.startswith(word + "/"):
            base, rest = home(), path[len(word) :]
            if not base:
                return path
            return base.rstrip("/") + rest if rest else base
    return os.path.expanduser(path) if path.startswith("~") else path


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


def venvs_under(root: str) -> "list[str]":
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


def conda_bases(homes: "list[str]") -> "list[str]":
    bases = [os.path.join(h, d) for h in homes for d in CONDA_DIRS] + ["/opt/" + d for d in CONDA_DIRS]
    return [b for b in bases if os.path.isdir(os.path.join(b, "conda-meta"))]


def conda_envs(homes: "list[str]") -> "list[str]":
    found = []
    for base in conda_bases(homes):
        found.append(os.path.join(base, "bin", "python"))
        try:  # noqa: SIM105  (far side: no contextlib import)
            found.extend(sorted(os.path.join(e.path, "bin", "python") for e in os.scandir(base + "/envs")))
        except OSError:
            pass
    return found


def running_pythons() -> "Iterator[str]":
    """Interpreters of the login user's running Python processes, lowest process id first: argv[0] if
    absolute (keeps venv paths), else the executable. Other users' processes are not candidates (their
    interpreters are theirs).

    Lazy: discovery wants the first acceptable one, and every process costs system calls (measured
    ≈ 4 µs a process, ≈ 11 µs one of the login user's: on a host with thousands, tens of milliseconds of
    every run), so the scan stops there. Another user's process costs a refused signal 0 (no /proc lookup:
    ≈ 20% of the scan), one of the login user's a stat (the owner of its /proc entry decides), the command
    line is read only for a Python of ours; names relative to one ``/proc`` descriptor."""
    try:
        proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        me = str(os.getpid())
        pids = [p for p in os.listdir(proc) if p.isdigit() and p != me]
        pids.sort(key=int)  # the kernel lists them in order already: a check, not a sort
        for pid in pids:
            try:
                if UID:  # signal 0 (none is sent) is refused for another user's process: a cheap first filter
                    os.kill(int(pid), 0)
                if os.stat(pid, dir_fd=proc).st_uid != UID:
                    continue
                exe = os.readlink(pid + "/exe", dir_fd=proc)
                if not os.path.basename(exe).startswith("python"):
                    continue
                cmdline = os.open(pid + "/cmdline", os.O_RDONLY, dir_fd=proc)
                try:
                    argv = os.read(cmdline, 1 << 16).split(b"\0")
                finally:
                    os.close(cmdline)
            except OSError:
                continue
            if OUR_BOOT in b"".join(argv[:3]):
                continue
            first = argv[0].decode(errors="replace")
            yield first if first.startswith("/") and os.path.basename(first).startswith("python") else exe
    finally:
        os.close(proc)


def candidate_groups() -> "Iterator[tuple[Iterable[str], bool]]":
    """(candidates, whether each must pass :func:`trusted_env`) in discovery order, group by group, so a
    caller that needs only the first stops early. The environment and PATH are the login user's own
    choice; what is found by looking around the file system is checked."""
    env = os.environ
    yield (
        [os.path.join(env[var], "bin", "python") for var in ("VIRTUAL_ENV", "CONDA_PREFIX") if env.get(var)],
        False,
    )
    yield venvs_under(home()), True
    yield venvs_under("/opt"), True
    yield conda_envs([home()]), True
    yield running_pythons(), True
    yield [path for path in (which("python3"), which("python")) if path], False


def identity(path: str) -> "tuple[str, str]":
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


def iter_candidates() -> "Iterator[str]":
    seen = set()
    for group, checked in candidate_groups():
        for path in group:
            path = os.path.abspath(path)
            key = identity(path)
            if key in seen or not acceptable(path, checked):
                continue
            seen.add(key)
            yield path


def discovery_order() -> "list[str]":
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
    for base in conda_bases([home()]):
        if name == "base":
            return os.path.join(base, "bin", "python")
        path = os.path.join(base, "envs", name, "bin", "python")
        if executable(path):
            return path
    return ""


def missing_modules(python: str, need: "list[str]") -> "tuple[str, list[str]]":
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


class NoInterpreter(Exception):
    """No interpreter (with the needed modules): the message, and what each candidate lacked."""

    def __init__(self, message: str, tried: list) -> None:  # type: ignore[type-arg]
        super().__init__(message)
        self.message = message
        self.tried = tried


def choose(cfg: dict) -> str:  # type: ignore[type-arg]
    """The interpreter to run the agent; NoInterpreter when there is none (with the needed modules)."""
    need = cfg.get("need") or []
    if cfg.get("python") or cfg.get("venv") or cfg.get("conda"):
        if cfg.get("python"):
            path, what = expand_home(cfg["python"]), "python=" + cfg["python"]
        elif cfg.get("venv"):
            path, what = os.path.join(expand_home(cfg["venv"]), "bin", "python"), "venv=" + cfg["venv"]
        else:
            path, what = conda_python(expand_home(cfg["conda"])), "conda=" + cfg["conda"]
        if not path or not executable(path):
            raise NoInterpreter(what + " has no Python interpreter" + (" at " + path if path else ""), [])
        candidates: Iterable[str] = [path]
    else:
        candidates = iter_candidates()
        if not need:
            first = next(iter(candidates), None)
            if first is None:
                why = "no Python interpreter found (no venv, conda env, running Python or python3 in PATH)"
                raise NoInterpreter(why, [])
            return str(first)
    if not need:
        return next(iter(candidates))
    tried = []
    for path in candidates:
        version, missing = missing_modules(path, need)
        if not missing:
            return path
        tried.append({"python": path, "version": version, "missing": missing})
    raise NoInterpreter("no interpreter has " + ", ".join(need), tried)


def fail(message: str, tried: list) -> None:  # type: ignore[type-arg]
    """Tell the local side there is no interpreter to run the agent (an ``F`` frame) and exit 127."""
    import json  # only on this path: json imports re

    data = json.dumps({"error": "interpreter", "message": message, "tried": tried}).encode()
    view = memoryview(b"F" + len(data).to_bytes(4, "big") + data)
    while view:
        view = view[os.write(1, view) :]
    os._exit(127)


def start(cfg: "dict[str, Any]", stage1: str) -> None:
    """Stage 1's step 2: return when this interpreter is the one to run the agent; else ``exec`` the chosen
    one with the same stage 1 (``stage1``, its argv word) and ``chosen`` set, or :func:`fail`."""
    try:
        python = choose(cfg)
    except NoInterpreter as exc:
        fail(exc.message, exc.tried)
    if identity(python) != identity(sys.executable):
        cfg["chosen"] = True
        encoded = binascii.b2a_base64(marshal.dumps(cfg, 4), newline=False).decode()
        os.execv(python, [python, "-c", cfg["boot"], stage1, encoded])
