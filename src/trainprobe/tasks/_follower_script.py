"""Far-side follower for ``trainprobe watch TARGET PATH``: stdlib only, sent as a script by the remote engine.

argv: PATH IDENT OFFSET INTERVAL (PATH's ``~`` or ``$HOME`` expanded by the shipped discovery's
``expand_home``, the far side's one home), where IDENT is ``dev:ino`` of the file the last run was reading
(or ``-``) and OFFSET the byte after the last line received. Prints one line per complete log line:
``dev:ino END TEXT`` (END is the byte offset just after that line; a first line ``#pid N`` names the
follower's process), so a reconnect resumes exactly where the local side stopped: if the file was rotated in
between, the old file is found again by its inode in the same directory and finished first.
"""

import os
import sys
import time
from typing import BinaryIO, Optional


def _ident(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}"


def _find_by_ident(directory: str, ident: str) -> Optional[str]:  # noqa: UP045 - runs on old Pythons
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    for name in names:
        candidate = os.path.join(directory, name)
        try:
            if _ident(os.stat(candidate)) == ident:
                return candidate
        except OSError:
            continue
    return None


class _Reader:
    def __init__(self, fh: BinaryIO, ident: str, pos: int) -> None:
        self.fh = fh
        self.ident = ident
        self.pos = pos
        self.buf = b""

    def drain(self) -> bool:
        data = self.fh.read()
        if not data:
            return False
        data = self.buf + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self.buf = data
            return True
        out = []
        for raw in data[:cut].split(b"\n"):
            self.pos += len(raw) + 1
            out.append(f"{self.ident} {self.pos} {raw.decode('utf-8', 'replace')}\n")
        self.buf = data[cut + 1 :]
        sys.stdout.write("".join(out))
        sys.stdout.flush()
        return True


def _open(path: str, offset: int) -> "Optional[_Reader]":  # noqa: UP045
    try:
        fh = open(path, "rb")  # noqa: SIM115 - kept open across polls, closed on rotation
    except OSError:
        return None
    fh.seek(offset)
    return _Reader(fh, _ident(os.fstat(fh.fileno())), offset)


def main() -> None:
    from trainprobe_discovery import expand_home  # type: ignore[import-not-found]  # shipped by watch_on

    path, want, offset, interval = expand_home(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    sys.stdout.write(f"#pid {os.getpid()}\n")
    sys.stdout.flush()
    reader: Optional[_Reader] = None  # noqa: UP045
    if want != "-":
        try:
            current = _ident(os.stat(path))
        except OSError:
            current = None
        if current == want:
            reader = _open(path, offset)
        else:
            old = _find_by_ident(os.path.dirname(os.path.abspath(path)), want)
            if old is not None:
                finished = _open(old, offset)
                if finished is not None:
                    while finished.drain():
                        pass
                    finished.fh.close()
    while True:
        if reader is None:
            reader = _open(path, 0)
            if reader is None:
                time.sleep(interval)
                continue
        if reader.drain():
            continue
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is not None and _ident(st) != reader.ident:
            while reader.drain():
                pass
            reader.fh.close()
            reader = None
            continue
        if st is not None and st.st_size < reader.pos:
            reader.fh.seek(0)
            reader.pos, reader.buf = 0, b""
            continue
        time.sleep(interval)


if __name__ == "__main__":
    main()
