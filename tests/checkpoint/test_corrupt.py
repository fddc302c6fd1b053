"""Broken input: one clear message naming the file and what is wrong; the other files are still scanned."""

from __future__ import annotations

import json
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from trainprobe.checkpoint import scan

torch = pytest.importorskip("torch")


def _good(tmp: Path) -> Path:
    path = tmp / "good.pt"
    torch.save({"w": torch.ones(1000), "b": torch.zeros(3)}, path)
    return path


def truncated_zip(tmp: Path) -> Path:
    data = _good(tmp).read_bytes()
    path = tmp / "trunc.pt"
    path.write_bytes(data[: len(data) // 2])
    return path


def truncated_legacy(tmp: Path) -> Path:
    src = tmp / "legacy-src.pt"
    torch.save({"w": torch.ones(1000)}, src, _use_new_zipfile_serialization=False)
    data = src.read_bytes()
    src.unlink()
    path = tmp / "trunc-legacy.pt"
    path.write_bytes(data[:-100])
    return path


def zip_missing_record(tmp: Path) -> Path:
    path = tmp / "missing.pt"
    with zipfile.ZipFile(_good(tmp)) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            if not info.filename.endswith("/data/0"):
                dst.writestr(info, src.read(info))
    return path


def safetensors_lying_header(tmp: Path) -> Path:
    from safetensors.torch import save_file

    path = tmp / "lie.safetensors"
    save_file({"w": torch.ones(4, 4)}, str(path))
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    header["w"]["shape"] = [8, 4]  # claims 128 bytes, its byte range holds 64
    raw = json.dumps(header, separators=(",", ":")).encode().ljust(n)
    assert len(raw) == n
    path.write_bytes(data[:8] + raw + data[8 + n :])
    return path


def safetensors_truncated(tmp: Path) -> Path:
    from safetensors.torch import save_file

    path = tmp / "short.safetensors"
    save_file({"w": torch.ones(64)}, str(path))
    path.write_bytes(path.read_bytes()[:-16])
    return path


def not_a_checkpoint(tmp: Path) -> Path:
    path = tmp / "notes.pt"
    path.write_text("this is not a checkpoint\n")
    return path


def empty_file(tmp: Path) -> Path:
    path = tmp / "empty.pt"
    path.touch()
    return path


# builder -> (words the one-line message must contain, verdict). Damage is a finding ("corrupt", exit 1);
# a file that is no checkpoint could not be judged ("unreadable", exit 2).
CASES: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "truncated zip": (truncated_zip, "not a complete zip archive: truncated at byte", "corrupt"),
    "truncated legacy": (truncated_legacy, "truncated at byte", "corrupt"),
    "zip missing a record": (zip_missing_record, "tensor w: the zip has no record good/data/0", "corrupt"),
    "safetensors header lies": (safetensors_lying_header, "header says F32[8, 4] (128 bytes)", "corrupt"),
    "safetensors truncated": (safetensors_truncated, "truncated at byte 312 of 328", "corrupt"),
    "wrong format": (not_a_checkpoint, "not a checkpoint format trainprobe reads", "unreadable"),
    "empty file": (empty_file, "is empty", "unreadable"),
}


@pytest.mark.parametrize("case", CASES)
def test_broken_file_is_named_and_others_still_scanned(tmp_path: Path, case: str) -> None:
    build, words, verdict = CASES[case]
    broken = build(tmp_path)
    nan = tmp_path / "nan.pt"
    torch.save({"w": torch.tensor([float("nan")])}, nan)
    good = tmp_path / "good.pt"
    if not good.exists():
        _good(tmp_path)

    report = scan([str(broken), str(good)])
    bad, ok = report.files
    assert bad.path == str(broken)
    assert bad.verdict == verdict
    assert bad.error is not None
    assert words in bad.error
    assert ok.verdict == "clean"
    assert ok.tensor_count == 2
    assert report.exit_code == (1 if verdict == "corrupt" else 2)

    # A finding elsewhere wins over an unreadable file: exit 1, the broken file still reported.
    report = scan([str(broken), str(nan)])
    assert [f.verdict for f in report.files] == [verdict, "nonfinite"]
    assert report.exit_code == 1


def test_an_empty_checkpoint_file_in_a_folder_or_a_unit_is_unreadable_never_dropped(tmp_path: Path) -> None:
    """A save that created its file and never wrote it: in a directory walk and inside a unit the same answer
    as the file given alone, never left out of the count (a unit that would read as healthy without it)."""
    from trainprobe.checkpoint.check import check_paths

    _good(tmp_path)
    (tmp_path / "model.pt").touch()
    (tmp_path / "notes").touch()  # an empty file of no checkpoint's name stays a listed side file
    unit = tmp_path / "checkpoint-2"
    unit.mkdir()
    (unit / "model.safetensors").touch()
    opt = torch.optim.Adam([torch.nn.Parameter(torch.ones(3))])
    opt.zero_grad()
    opt.param_groups[0]["params"][0].grad = torch.ones(3)
    opt.step()
    torch.save(opt.state_dict(), unit / "optimizer.pt")

    report = scan([str(tmp_path)])
    verdicts = {f.path: f.verdict for f in report.files}
    assert verdicts[str(tmp_path / "model.pt")] == "unreadable"
    assert verdicts[str(unit / "model.safetensors")] == "unreadable"
    assert str(tmp_path / "notes") not in verdicts
    assert report.exit_code == 2
    checked = {u["path"]: u for u in check_paths([str(unit)]).to_json()["units"]}
    assert checked[str(unit)]["verdict"] == "unreadable"
    assert "is empty" in json.dumps(checked[str(unit)])


def test_verify_finds_a_flipped_byte_that_loading_ignores(tmp_path: Path) -> None:
    path = _good(tmp_path)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith("/data/0"))
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + 100] ^= 0x01  # still a finite float: only the CRC can tell
    path.write_bytes(bytes(data))

    assert scan([str(path)]).exit_code == 0
    report = scan([str(path)], verify=True)
    (f,) = report.files
    assert f.verdict == "corrupt"
    assert report.exit_code == 1  # a CRC mismatch is a finding, not an unreadable file
    assert len(f.problems) == 1
    assert "good/data/0 fails its CRC32 check" in f.problems[0]
    assert f.problems[0].endswith(": it holds w")  # named by the tensor, not only the record


def test_verify_passes_on_intact_files(tmp_path: Path) -> None:
    report = scan([str(_good(tmp_path))], verify=True)
    assert report.files[0].problems == []
    assert report.exit_code == 0


def test_random_damage_never_stops_the_scan(tmp_path: Path) -> None:
    """Flip bytes all over a real checkpoint (pickle, headers, data): every outcome is a report."""
    import random

    src = tmp_path / "src.pt"
    torch.save({"w": torch.ones(8, 8), "opt": {"state": {0: {"m": torch.zeros(8)}}, "param_groups": []}}, src)
    data = src.read_bytes()
    rng = random.Random(7)
    paths = []
    for i in range(60):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        path = tmp_path / f"d{i}.pt"
        path.write_bytes(bytes(damaged) if i % 3 else bytes(damaged[: rng.randrange(len(damaged))]))
        paths.append(str(path))
    report = scan(paths, verify=True, stats=True)
    assert len(report.files) == 60
    assert {f.verdict for f in report.files} <= {"clean", "nonfinite", "suspicious", "corrupt", "unreadable"}
    assert all(f.error or f.tensors for f in report.files)
    assert report.exit_code in (0, 1, 2)
