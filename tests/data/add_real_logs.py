"""Add staged real-log cases to the corpus: each goes into the tuned or the held-out part by one random draw.

``python tests/data/add_real_logs.py STAGED_CASE_DIR...`` moves each case directory (its log files,
``expected.json`` and ``PROVENANCE.row.md``: one table row) into ``tests/data/real-logs/`` (tuned) or
``tests/data/real-logs-held-out/`` (held out), appends its row to that part's PROVENANCE.md and its draw to
``tests/data/real-logs-split.md``. A case already in either part is refused: a draw is never made twice.

The draw: ``random.Random(f"{SEED}:{case name}").random() < HELD_OUT_SHARE``. It depends only on the seed
(drawn from os.urandom once, when the split began) and the case's name, never on its content or on what a
reader makes of it, and it is made before any reader has run on the case. The 35 cases collected before the
split began were all tuned on already, so they are in the tuned part; the share is set so that about 30% of
the whole corpus (at 120 cases) is held out.
"""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path

SEED = "d269281e"
HELD_OUT_SHARE = 0.42
DATA = Path(__file__).resolve().parent
TUNED = DATA / "real-logs"
HELD_OUT = DATA / "real-logs-held-out"
SPLIT = DATA / "real-logs-split.md"

HELD_OUT_HEADER = """# Real public training logs: the held-out part

Cases drawn at random into the held-out part when they were added (tests/data/add_real_logs.py; the draws
are in tests/data/real-logs-split.md). Only `benchmarks/logs_quality.py` reads them, and it prints counts
only: nobody changing a reader or a detector opens them. The rules of retrieval and of expected.json are
those of tests/data/real-logs/PROVENANCE.md.

| case | source (repository @ commit, path) | licence | what it is |
|---|---|---|---|
"""

SPLIT_HEADER = f"""# The draw of each real-log case into the tuned or the held-out part

`random.Random("{SEED}:<case>").random() < {HELD_OUT_SHARE}` puts a case into tests/data/real-logs-held-out/
(see tests/data/add_real_logs.py). The 35 cases collected before the split began are all in the tuned part.

| case | draw | part |
|---|---|---|
"""


def draw(name: str) -> float:
    return random.Random(f"{SEED}:{name}").random()


def add(staged: Path) -> str:
    name = staged.name
    if (TUNED / name).exists() or (HELD_OUT / name).exists():
        raise SystemExit(f"{name}: already in the corpus (a case is drawn once)")
    row_file = staged / "PROVENANCE.row.md"
    row = row_file.read_text(encoding="utf-8").strip()
    if not (staged / "expected.json").is_file() or not row.startswith("|"):
        raise SystemExit(f"{name}: needs expected.json and a one-row PROVENANCE.row.md")
    value = draw(name)
    part = HELD_OUT if value < HELD_OUT_SHARE else TUNED
    if part is HELD_OUT and not (HELD_OUT / "PROVENANCE.md").exists():
        HELD_OUT.mkdir(exist_ok=True)
        (HELD_OUT / "PROVENANCE.md").write_text(HELD_OUT_HEADER, encoding="utf-8")
    if not SPLIT.exists():
        SPLIT.write_text(SPLIT_HEADER, encoding="utf-8")
    shutil.copytree(staged, part / name)
    (part / name / "PROVENANCE.row.md").unlink()
    with (part / "PROVENANCE.md").open("a", encoding="utf-8") as out:
        out.write(row + "\n")
    with SPLIT.open("a", encoding="utf-8") as out:
        out.write(f"| `{name}` | {value:.4f} | {'held out' if part is HELD_OUT else 'tuned'} |\n")
    shutil.rmtree(staged)
    return "held out" if part is HELD_OUT else "tuned"


def main(argv: list[str]) -> int:
    parts = [add(Path(a)) for a in argv]
    print(f"{parts.count('tuned')} tuned, {parts.count('held out')} held out")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
