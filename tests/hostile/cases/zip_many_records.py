"""A zip archive of 300,000 empty records (8 MB of central directory): refused by the tensor limit before
zipfile builds 300,000 objects."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, RawRecord, named, pickle_of, raw_zip, text

CASE = Case(scan=2, check=2, triage=2, says="more than the 100,000 trainprobe reads in one file")


def build(folder: Path, sentinel: Path) -> Path:
    data = pickle_of(named(x=text("y")))
    records = [RawRecord("archive/data.pkl", data, len(data))]
    records += [RawRecord(f"archive/data/{i}", b"", 0) for i in range(300_000)]
    return raw_zip(folder / "records.pt", records)
