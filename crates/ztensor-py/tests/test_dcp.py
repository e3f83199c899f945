"""``ztensor_rs.torch.dcp``: Distributed Checkpoint saved through ``ZTensorWriter`` and loaded
through ``ZTensorReader`` by real ``torchrun`` jobs (gloo, CPU), DTensors sharded on different
dimensions, at 1, 2 and 3 ranks; every tensor checked against the full state dict."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys

import pytest
import torch
import torch.distributed.checkpoint as dcp

import ztensor_rs
from ztensor_rs.torch.dcp import INDEX, ZTensorReader

WORKER = pathlib.Path(__file__).parent / "support" / "dcp_worker.py"
sys.path.insert(0, str(WORKER.parent))
import dcp_worker  # noqa: E402


def run_alone(path: pathlib.Path, placement: str) -> str:
    """Loads the checkpoint at ``path`` in one process (no process group)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    args = [sys.executable, str(WORKER), "load-alone", str(path), placement]
    out = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    return out.stdout


def launch(ranks: int, jobs: list[tuple[str, pathlib.Path, str]]) -> str:
    """Runs the worker's ``jobs`` (mode, path, placement) one after the other in one
    ``torchrun --standalone`` launch of ``ranks`` ranks (each launch costs seconds)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}", str(WORKER)]
    for mode, path, placement in jobs:
        args += [mode, str(path), placement]
    # In a session of its own, so a launch that runs out of time is stopped whole (torchrun
    # and every rank), not torchrun alone.
    launched = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        stdout, stderr = launched.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(launched.pid, signal.SIGKILL)
        stdout, stderr = launched.communicate()
        raise AssertionError("the launch ran past 300 s: " + stdout[-3000:] + stderr[-6000:]) from None
    assert launched.returncode == 0, stdout[-3000:] + stderr[-6000:]
    return stdout


def done(output: str, mode: str, path: pathlib.Path, ranks: int) -> None:
    """Every rank of the launch whose ``output`` this is said the job went through."""
    said = [line for line in output.splitlines() if line.startswith(f"{mode} {path} rank ")]
    assert sorted(said) == [f"{mode} {path} rank {r} of {ranks}: ok" for r in range(ranks)], said


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict:
    """Every checkpoint the tests read, saved by real torchrun jobs, and the loads at other world
    sizes and placements than they were saved in, in three launches: at 2 ranks (placement "a",
    the zstd native save "b") and at 3 ("b"), then the loads of the 3-rank save at 2.

    Keys: ``(mode, ranks)`` for each saved directory; ``"output"`` for each launch's lines by
    ranks (``"output-load"`` for the third)."""
    root = tmp_path_factory.mktemp("dcp")
    at2 = [("save", "a"), ("save-native", "a"), ("save-native-zstd", "b"), ("save-hf", "a")]
    at3 = [("save", "b"), ("save-native", "b"), ("save-hf-consolidated", "b")]
    out: dict = {}
    for ranks, saves in ((2, at2), (3, at3)):
        for mode, _ in saves:
            out[(mode, ranks)] = root / f"{mode}-at-{ranks}"
    first = [(mode, out[(mode, 2)], placement) for mode, placement in at2]
    out[("output", 2)] = launch(2, first)
    # At 3 ranks, also the 2-rank save loaded into the other placement.
    second = [(mode, out[(mode, 3)], placement) for mode, placement in at3]
    second.append(("load", out[("save", 2)], "b"))
    out[("output", 3)] = launch(3, second)
    out["output-load"] = launch(2, [("load", out[("save", 3)], "a"), ("load", out[("save", 2)], "b")])
    return out


@pytest.fixture(scope="module")
def saved(jobs) -> dict[int, pathlib.Path]:
    """The state dict saved through ``ZTensorWriter`` at 2 ranks (placement "a") and at 3 ("b")."""
    done(jobs[("output", 2)], "save", jobs[("save", 2)], 2)
    done(jobs[("output", 3)], "save", jobs[("save", 3)], 3)
    return {2: jobs[("save", 2)], 3: jobs[("save", 3)]}


@pytest.mark.parametrize(("saved_at", "loaded_at"), [(2, 1), (2, 2), (2, 3), (3, 1), (3, 2)])
def test_a_checkpoint_reloads_at_any_world_size_and_placement(jobs, saved, saved_at, loaded_at):
    # Loaded into the other placement than it was saved in: every sharded tensor moves.
    placement = "b" if saved_at == 2 else "a"
    if loaded_at == 1:
        assert "checked 1 rank" in run_alone(saved[saved_at], placement)
        return
    output = jobs["output-load"] if loaded_at == 2 else jobs[("output", 3)]
    done(output, "load", saved[saved_at], loaded_at)


def test_the_directory_is_a_sharded_ztensor_checkpoint(saved):
    path = saved[3]
    index = json.loads((path / INDEX).read_text())
    shards = sorted(p.name for p in path.glob("*.zt"))
    assert shards == ["model-00001-of-00003.zt", "model-00002-of-00003.zt", "model-00003-of-00003.zt"]
    assert sorted(index["shards"]) == shards
    # Each chunk, read from its shard, is the slice of the full tensor its offsets say.
    full = dcp_worker.full_state()["model"]
    chunks = {}
    for shard in shards:
        chunks.update(ztensor_rs.torch.load_file(path / shard))
    entries = index["dcp"]["state_dict"]
    checked = 0
    for fqn, entry in entries.items():
        if entry["kind"] != "tensor":
            continue
        want = full[fqn.removeprefix("model.")]
        assert entry["size"] == list(want.shape) and entry["dtype"] == str(want.dtype).removeprefix("torch.")
        for chunk in entry["chunks"]:
            got = chunks[chunk["object"]]
            part = want[tuple(slice(o, o + n) for o, n in zip(chunk["offsets"], chunk["sizes"]))]
            assert got.shape == part.shape
            assert torch.equal(got.reshape(-1).view(torch.uint8), part.contiguous().reshape(-1).view(torch.uint8)), chunk["object"]
            checked += 1
    assert checked >= 15, checked
    # zstd and sha256 per tensor, as asked of the writer; the shard digests in the index hold.
    with ztensor_rs.safe_open(path / shards[0]) as f:
        info = f.info(f.keys()[0])
    component = next(iter(info["components"].values()))
    assert component["digest"].startswith("sha256:")


def test_a_damaged_index_is_refused_not_followed(saved, tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    for p in saved[2].iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    index = json.loads((copy / INDEX).read_text())
    name = next(iter(index["weight_map"]))
    index["weight_map"][name] = "../outside.zt"
    (copy / INDEX).write_text(json.dumps(index))
    with pytest.raises(ztensor_rs.FormatError, match="in no shard beside the index"):
        ZTensorReader(copy).read_metadata()
    (copy / INDEX).write_text(json.dumps({"metadata": {"total_size": 0}, "shards": {}, "weight_map": {}}))
    with pytest.raises(ztensor_rs.FormatError, match="not a checkpoint ZTensorWriter wrote"):
        ZTensorReader(copy).read_metadata()
    assert ZTensorReader.validate_checkpoint_id(saved[2])
    assert not ZTensorReader.validate_checkpoint_id(tmp_path)


@pytest.mark.parametrize("saved_at", [2, 3])
def test_the_checkpoint_reads_as_whole_tensors_and_consolidates(saved, saved_at, tmp_path):
    """Through the format registry (what every ``ztensor`` command and ``convert`` read), the
    directory is its whole tensors, chunks stitched by their offsets; consolidated into one
    safetensors file, each tensor equals the full state dict's, as safetensors.torch reads it."""
    import safetensors.torch

    index = saved[saved_at] / INDEX
    full = dcp_worker.full_state()["model"]
    whole = ztensor_rs.torch.load_file(index)
    assert sorted(whole) == sorted(f"model.{k}" for k in full)
    # The directory ZTensorWriter saved is the same checkpoint as its index.
    by_directory = ztensor_rs.torch.load_file(saved[saved_at])
    assert sorted(by_directory) == sorted(whole)
    for name, tensor in whole.items():
        assert torch.equal(by_directory[name].reshape(-1).view(torch.uint8), tensor.reshape(-1).view(torch.uint8)), name
    out = tmp_path / "consolidated.safetensors"
    assert ztensor_rs.convert(index, out, to="safetensors") == len(full)
    for source in (whole, safetensors.torch.load_file(str(out))):
        for name, want in full.items():
            got = source[f"model.{name}"]
            assert got.dtype == want.dtype and got.shape == want.shape, name
            assert torch.equal(got.reshape(-1).view(torch.uint8), want.reshape(-1).view(torch.uint8)), name


def damaged(saved: pathlib.Path, tmp_path: pathlib.Path, change) -> pathlib.Path:
    """A copy of the checkpoint ``saved`` whose index ``change`` altered."""
    copy = tmp_path / "damaged"
    copy.mkdir(exist_ok=True)
    for p in saved.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    index = json.loads((copy / INDEX).read_text())
    change(index["dcp"]["state_dict"])
    (copy / INDEX).write_text(json.dumps(index))
    return copy / INDEX


def chunks_of(entries, name):
    return entries[name]["chunks"]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        # Saved at 3 ranks, w0 (12x10) is in chunks of 4, 4 and 2 columns.
        (lambda e: chunks_of(e, "model.w0")[1]["offsets"].__setitem__(1, 3), "overlap"),
        (lambda e: chunks_of(e, "model.w0").pop(1), "hole"),
        (lambda e: chunks_of(e, "model.w0")[2]["offsets"].__setitem__(1, 11), "past the tensor"),
        (lambda e: e["model.w0"].__setitem__("dtype", "int32"), "where the tensor is i32"),
        (lambda e: chunks_of(e, "model.w0")[0]["sizes"].__setitem__(1, 5), "shape"),
    ],
)
def test_chunks_that_do_not_make_their_tensor_are_refused_naming_it(saved, tmp_path, change, said):
    index = damaged(saved[3], tmp_path, change)
    with pytest.raises(ztensor_rs.FormatError) as refused:
        ztensor_rs.load_file(index)
    assert "model.w0" in str(refused.value) and said in str(refused.value), str(refused.value)


@pytest.mark.parametrize(("ranks", "mode"), [(2, "save-native"), (3, "save-native"), (2, "save-native-zstd")])
def test_a_checkpoint_dcp_saved_itself_consolidates_tensor_by_tensor(jobs, tmp_path, ranks, mode):
    """DCP's own FileSystemWriter at 2 and 3 ranks (`.metadata` and `__R_0.distcp`), and with
    its ZStandard storage extension: read through the format registry as its whole tensors,
    and consolidated into one safetensors file equal, tensor by tensor, to the full state
    dict."""
    import safetensors.torch

    path = jobs[(mode, ranks)]
    done(jobs[("output", ranks)], mode, path, ranks)
    if mode.endswith("zstd"):
        assert b"stream.zstd/1" in (path / ".metadata").read_bytes()
    assert ztensor_rs.detect(path) == "pytorch-dcp"
    full = dcp_worker.full_state()["model"]
    out = tmp_path / "consolidated.safetensors"
    assert ztensor_rs.convert(path, out, to="safetensors") == len(full)
    consolidated = safetensors.torch.load_file(str(out))
    assert sorted(consolidated) == sorted(f"model.{k}" for k in full)
    for name, want in full.items():
        got = consolidated[f"model.{name}"]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert torch.equal(got.reshape(-1).view(torch.uint8), want.reshape(-1).view(torch.uint8)), name
    # As PyTorch's own consolidation gives it (dcp_to_torch_save), for every tensor.
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    theirs_path = tmp_path / "theirs.pt"
    dcp_to_torch_save(str(path), str(theirs_path))
    theirs = torch.load(theirs_path, weights_only=False)["model"]
    for name, tensor in theirs.items():
        got = consolidated[f"model.{name}"]
        assert torch.equal(got.reshape(-1).view(torch.uint8), tensor.reshape(-1).view(torch.uint8)), name


def same_bytes(got: torch.Tensor, want: torch.Tensor, name: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape, want.shape)
    assert torch.equal(got.reshape(-1).view(torch.uint8), want.contiguous().reshape(-1).view(torch.uint8)), name


@pytest.fixture(scope="module")
def hf_saved(jobs) -> dict[int, pathlib.Path]:
    """The state dict's tensors saved through DCP's ``HuggingFaceStorageWriter`` with
    ``save_distributed``: at 2 ranks (placement "a"), and at 3 (placement "b", its floating
    point tensors) consolidated by torch afterwards (the shards then lie in ``sharded/``)."""
    out = {}
    for ranks, mode in ((2, "save-hf"), (3, "save-hf-consolidated")):
        done(jobs[("output", ranks)], mode, jobs[(mode, ranks)], ranks)
        out[ranks] = jobs[(mode, ranks)]
    return out


@pytest.mark.parametrize("saved_at", [2, 3])
def test_dcp_s_safetensors_shards_read_as_one_checkpoint(hf_saved, saved_at, tmp_path):
    """The directory of each rank's ``shard-RRRRR-model-00001-of-00001.safetensors`` (no
    index, no ``.metadata``: each chunk placed by ``DCP_SHARDING_INFO``) reads as the whole
    tensors, and converts to one safetensors file equal, tensor by tensor, to the full state
    dict, as safetensors.torch reads it."""
    import safetensors.torch

    shards = hf_saved[2] if saved_at == 2 else hf_saved[3] / "sharded"
    names = sorted(p.name for p in shards.glob("*.safetensors"))
    assert names == [f"shard-0000{r}-model-00001-of-00001.safetensors" for r in range(1, saved_at + 1)]
    assert ztensor_rs.detect(shards) == "pytorch-dcp-safetensors"
    full = dcp_worker.full_state()["model"]
    if saved_at == 3:
        full = {k: v for k, v in full.items() if v.dtype.is_floating_point}
    whole = ztensor_rs.torch.load_file(shards)
    assert sorted(whole) == sorted(f"model.{k}" for k in full)
    out = tmp_path / "whole.safetensors"
    assert ztensor_rs.convert(shards, out, to="safetensors") == len(full)
    consolidated = safetensors.torch.load_file(str(out))
    with ztensor_rs.safe_open(shards, framework="pt") as opened:
        assert sorted(opened.keys()) == sorted(whole)
        lazily = {name: opened.get_tensor(name) for name in opened.keys()}
    for name, want in full.items():
        same_bytes(whole[f"model.{name}"], want, name)
        same_bytes(consolidated[f"model.{name}"], want, name)
        same_bytes(lazily[f"model.{name}"], want, name)
    if saved_at == 3:
        # Torch's own consolidation beside them (model-00001-of-00001.safetensors and its
        # index): the directory reads as that checkpoint, equal to ours tensor by tensor.
        assert ztensor_rs.detect(hf_saved[3]) == "safetensors-sharded"
        theirs = safetensors.torch.load_file(str(hf_saved[3] / "model-00001-of-00001.safetensors"))
        read = ztensor_rs.torch.load_file(hf_saved[3])
        for name, want in full.items():
            same_bytes(read[f"model.{name}"], theirs[f"model.{name}"], name)
            if want.dim() == 0 and not theirs[f"model.{name}"].any():
                # Torch 2.15's consolidation writes no bytes for a tensor of no dimensions
                # (its sub-tensor writer returns early on an empty shape): its file holds zero
                # there, where the shards (and ours) hold the value.
                assert want.any(), name
                continue
            same_bytes(consolidated[f"model.{name}"], theirs[f"model.{name}"], name)


def test_dcp_s_safetensors_at_one_rank_read_whole(tmp_path):
    """At one rank (no process group): with ``save_distributed`` one shard of whole tensors;
    without it, ``model-00001-of-00001.safetensors`` and its index."""
    from torch.distributed.checkpoint import HuggingFaceStorageWriter

    full = dcp_worker.full_state()["model"]
    for distributed in (True, False):
        path = tmp_path / f"distributed-{distributed}"
        writer = HuggingFaceStorageWriter(str(path), save_distributed=distributed)
        dcp.save({"model": dict(full)}, storage_writer=writer, no_dist=True)
        kind = "pytorch-dcp-safetensors" if distributed else "safetensors-sharded"
        assert ztensor_rs.detect(path) == kind
        whole = ztensor_rs.torch.load_file(path)
        assert sorted(whole) == sorted(f"model.{k}" for k in full)
        for name, want in full.items():
            same_bytes(whole[f"model.{name}"], want, name)


def rewritten_header(path: pathlib.Path, change) -> None:
    """Rewrites the safetensors file at ``path`` with ``change`` applied to its header's
    ``DCP_SHARDING_INFO``, the data kept."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    info = json.loads(header["__metadata__"]["DCP_SHARDING_INFO"])
    change(info)
    header["__metadata__"]["DCP_SHARDING_INFO"] = json.dumps(info)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + n :])


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        # Saved at 3 ranks (placement "b"), w0 (12x10) is in chunks of 4, 4 and 2 columns.
        # The middle rank's file gone: its chunks leave holes.
        (lambda d: (d / "shard-00002-model-00001-of-00001.safetensors").unlink(), "hole"),
        (
            lambda d: rewritten_header(
                d / "shard-00002-model-00001-of-00001.safetensors",
                lambda info: info["model.w0"].__setitem__("saved_offsets", [0, 3]),
            ),
            "overlap",
        ),
        (
            lambda d: rewritten_header(
                d / "shard-00003-model-00001-of-00001.safetensors",
                lambda info: info.pop("model.w0"),
            ),
            "not in its DCP_SHARDING_INFO",
        ),
    ],
)
def test_damaged_dcp_safetensors_shards_are_refused_naming_what(hf_saved, tmp_path, damage, said):
    copy = tmp_path / "damaged"
    copy.mkdir()
    for p in (hf_saved[3] / "sharded").iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    damage(copy)
    with pytest.raises(ztensor_rs.FormatError, match=said):
        ztensor_rs.load_file(copy)
