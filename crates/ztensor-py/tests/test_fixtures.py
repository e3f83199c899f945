"""Every fixture of the repository, read through Python: valid files give exactly what their
golden dumps (written by the Rust conformance dump) record, and so do the files other producers
wrote (fixtures/producers); rejected files raise with the rule the index names."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest

import ztensor_rs
from conftest import FIXTURES, index

# Implementation-defined files: this package reads leniently, so it accepts them, with the
# content of their golden dumps.
VALID = [f for f in index() if f["expect"] in ("ok", "implementation-defined")]
# TensorBuffers golden dumps keep the format's own metadata names (the Python model files them
# under tensorbuffers.* keys); the conformance runner compares those in Rust.
GOLDEN = [f for f in VALID if f["version"] != "tensorbuffers"]
REJECT = [f for f in index() if f["expect"] not in ("ok", "implementation-defined")]


def dump_json(value):
    """Python attribute data in the conformance dump's JSON conventions."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else {"$int": str(value)}
    if isinstance(value, float):
        if math.isnan(value):
            return {"$float": "NaN"}
        if math.isinf(value):
            return {"$float": "Infinity" if value > 0 else "-Infinity"}
        return value
    if isinstance(value, bytes):
        return {"$bytes": value.hex()}
    if isinstance(value, list):
        return [dump_json(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: dump_json(v) for k, v in value.items()}
        return {"$map": [[dump_json(k), dump_json(v)] for k, v in value.items()]}
    raise TypeError(type(value))


def has_tag(value) -> bool:
    if isinstance(value, dict):
        return "$tag" in value or any(has_tag(v) for v in value.values())
    if isinstance(value, list):
        return any(has_tag(v) for v in value)
    return False


def decoded_bytes(component: ztensor_rs.Component) -> bytes:
    return component.array.tobytes()


@pytest.mark.parametrize("fixture", GOLDEN, ids=[f["file"] for f in GOLDEN])
def test_valid_fixture_matches_its_golden_dump(fixture):
    path = FIXTURES / fixture["file"]
    golden = json.loads(path.with_suffix(".json").read_text())
    with ztensor_rs.safe_open(path) as f:
        if golden["attributes"] is None:
            assert f.metadata() is None
        elif not has_tag(golden["attributes"]):
            assert dump_json(f.metadata()) == golden["attributes"]
        names = {o["name"] for o in golden["objects"]}
        assert set(f.keys()) == names
        by_name: dict[str, list] = {}
        for o in golden["objects"]:
            by_name.setdefault(o["name"], []).append(o)
        for name, candidates in by_name.items():
            if all(c["error"] is not None for c in candidates):
                with pytest.raises(ztensor_rs.ZTensorError):
                    f.get_object(name)
                continue
            obj = f.get_object(name)
            mine = {
                "format": obj.format,
                "shape": list(obj.shape),
                "components": {
                    role: {
                        "dtype": c.dtype,
                        "type": c.type,
                        "decoded_length": len(decoded_bytes(c)),
                        "sha256": hashlib.sha256(decoded_bytes(c)).hexdigest(),
                    }
                    for role, c in obj.components.items()
                },
            }
            expected = [
                {
                    "format": c["format"],
                    "shape": c["shape"],
                    "components": {
                        role: {k: comp[k] for k in ("dtype", "type", "decoded_length", "sha256")}
                        for role, comp in c["components"].items()
                    },
                }
                for c in candidates
                if c["error"] is None
            ]
            assert mine in expected, (name, mine, expected)
            if len(candidates) == 1 and candidates[0]["attributes"] is not None:
                if not has_tag(candidates[0]["attributes"]):
                    assert dump_json(obj.attributes) == candidates[0]["attributes"]


@pytest.mark.parametrize("fixture", VALID, ids=[f["file"] for f in VALID])
def test_valid_fixture_loads_whole_and_from_bytes(fixture):
    path = FIXTURES / fixture["file"]
    golden_path = path.with_suffix(".json")
    golden = json.loads(golden_path.read_text()) if golden_path.exists() else None
    if golden is not None and any(o["error"] is not None for o in golden["objects"]):
        with pytest.raises(ztensor_rs.ZTensorError):
            ztensor_rs.load_file(path)
        return
    whole = ztensor_rs.load_file(path, threads=2)
    from_bytes = ztensor_rs.load(path.read_bytes())
    unmapped = ztensor_rs.load_file(path, mmap=False)
    assert whole.keys() == from_bytes.keys() == unmapped.keys()
    if golden is not None:
        assert whole.keys() == {o["name"] for o in golden["objects"]}
    for name, value in whole.items():
        if isinstance(value, np.ndarray):
            for other in (from_bytes[name], unmapped[name]):
                assert value.dtype == other.dtype and value.shape == other.shape
                assert value.tobytes() == other.tobytes()


@pytest.mark.parametrize("fixture", REJECT, ids=[f["file"] for f in REJECT])
def test_reject_fixture_raises_with_its_rule(fixture):
    path = FIXTURES / fixture["file"]
    with pytest.raises(ztensor_rs.ZTensorError) as caught:
        ztensor_rs.load_file(path)
    assert caught.value.rule == fixture["expect"], str(caught.value)
    # The same from memory, where the bytes say what format they are in (a file name's
    # extension no longer helps): else the error says the format is not known.
    data = path.read_bytes()
    identifiable = data[:4] in (b"ZTEN", b"TBS1") or data[-8:-4] == b"ZTEN" or data[-4:] == b"TBS1"
    with pytest.raises(ztensor_rs.ZTensorError) as caught:
        ztensor_rs.load(data)
    if identifiable:
        assert caught.value.rule == fixture["expect"], str(caught.value)
    else:
        assert caught.value.rule is None and "which ztensor does not read" in str(caught.value)
