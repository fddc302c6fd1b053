"""Non-Unicode names in JSON documents: escaped text plus raw bytes (docs/names.md)."""

from __future__ import annotations

import base64
import json
import os

from trainprobe.json_names import i_json


def test_path_with_a_byte_that_is_not_utf8() -> None:
    path = os.fsdecode(b"run/a\xff.pt")
    doc = i_json({"path": path, "files": [path, "ok.pt"], "n": 1})
    text = json.dumps(doc, ensure_ascii=False)
    text.encode("utf-8")  # I-JSON: valid UTF-8 throughout
    assert doc["path"] == "run/a\\xff.pt"
    assert base64.b64decode(doc["path_bytes_b64"]) == b"run/a\xff.pt"
    assert doc["files_bytes_b64"][1] is None
    assert base64.b64decode(doc["files_bytes_b64"][0]) == b"run/a\xff.pt"


def test_surrogate_from_data_and_keys() -> None:
    doc = i_json({"tensors": {"w\udcff": {"name": "w\ud800"}}})
    assert "w\\xff" in doc["tensors"]
    assert base64.b64decode(doc["tensors"]["_keys_bytes_b64"]["w\\xff"]) == b"w\xff"
    inner = doc["tensors"]["w\\xff"]
    inner["name"].encode("utf-8")
    assert base64.b64decode(inner["name_bytes_b64"]) == "w\ud800".encode("utf-8", "surrogatepass")


def test_valid_documents_unchanged() -> None:
    doc = {"path": "a.pt", "list": ["x", 1, None], "nested": {"k": "ü"}}
    assert i_json(doc) == doc
