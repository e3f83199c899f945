"""One rank of a Distributed Checkpoint test, run by ``torchrun`` (gloo, CPU) or alone
(``no_dist``): saves a state dict of DTensors sharded on different dimensions through
``ZTensorWriter``, or loads one through ``ZTensorReader`` into other placements and checks
every tensor against the full state dict, which every rank (and the test) builds the same way.

Usage: dcp_worker.py save|save-native|load|load-alone CHECKPOINT_DIR PLACEMENT

``save-native`` saves through DCP's own ``FileSystemWriter`` instead; ``save-hf`` through its
``HuggingFaceStorageWriter`` (each rank's safetensors shard, ``save_distributed``), and
``save-hf-consolidated`` the same, then consolidated by torch (its floating-point tensors only:
torch's consolidation takes each dtype's width from ``torch.finfo``).
"""

from __future__ import annotations

import datetime
import os
import sys
import traceback

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from ztensor_rs.torch.dcp import ZTensorReader, ZTensorWriter


def full_state() -> dict:
    g = torch.Generator().manual_seed(11)
    return {
        "model": {
            "w0": torch.randn(12, 10, generator=g),
            "w1": torch.randn(10, 12, generator=g).to(torch.bfloat16),
            "emb": torch.randn(9, 5, generator=g).to(torch.float16),
            "bias": torch.arange(7, dtype=torch.int64),
            "mask": torch.randn(5, 3, generator=g) > 0,
            "fp8": torch.randn(8, 4, generator=g).to(torch.float8_e4m3fn),
            "scalar": torch.tensor(3.25),
        },
        "step": 11,
        "opt": {"lr": 0.125, "betas": [0.9, 0.999]},
    }


# How each tensor is placed, by placement name: the dimension it is sharded on (None:
# replicated). "a" and "b" differ for every sharded tensor.
PLACEMENTS = {
    "a": {"w0": 0, "w1": 1, "emb": None, "bias": 0, "mask": 1, "fp8": 0},
    "b": {"w0": 1, "w1": 0, "emb": 0, "bias": None, "mask": 0, "fp8": 1},
}


def local_part(tensor: torch.Tensor, dim, rank: int, world: int) -> torch.Tensor:
    """This rank's part of ``tensor`` sharded on ``dim`` (``None``: all of it), as DTensor's
    ``Shard`` splits it (``torch.chunk``; ranks past the last chunk hold none)."""
    if dim is None:
        return tensor
    chunks = torch.chunk(tensor, world, dim)
    return chunks[rank] if rank < len(chunks) else tensor.narrow(dim, 0, 0)


def distributed(state: dict, placement: str, mesh) -> dict:
    """The state dict as DTensors, each rank making its own part (no collective carries
    tensor data: gloo has no FP8 or bool scatter)."""
    from torch.distributed.tensor import DTensor, Replicate, Shard

    rank, world = dist.get_rank(), dist.get_world_size()
    out = {"model": {}, "step": state["step"], "opt": dict(state["opt"])}
    for name, tensor in state["model"].items():
        dim = PLACEMENTS[placement].get(name)
        spec = [Replicate()] if dim is None else [Shard(dim)]
        local = local_part(tensor, dim, rank, world).clone()
        out["model"][name] = DTensor.from_local(local, mesh, spec, run_check=False, shape=tensor.shape, stride=tensor.stride())
    return out


def emptied(state: dict) -> dict:
    return {
        "model": {k: torch.zeros_like(v) for k, v in state["model"].items()},
        "step": 0,
        "opt": {"lr": 0.0, "betas": [0.0, 0.0]},
    }


def check(loaded: dict, expected: dict, placement: str) -> None:
    """Every tensor (this rank's part of it, for a DTensor) holds exactly the expected bytes."""
    for name, want in expected["model"].items():
        got = loaded["model"][name]
        if hasattr(got, "to_local"):
            want = local_part(want, PLACEMENTS[placement].get(name), dist.get_rank(), dist.get_world_size())
            got = got.to_local()
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape, want.shape)
        if want.dtype == torch.bool:
            assert torch.equal(got, want), name
        else:
            assert torch.equal(got.reshape(-1).view(torch.uint8), want.reshape(-1).view(torch.uint8)), name
    assert loaded["step"] == expected["step"], loaded["step"]
    assert loaded["opt"] == expected["opt"], loaded["opt"]


def job(mode: str, path: str, placement: str, state: dict, mesh) -> None:
    """One save or load of the state dict at ``path`` by every rank of the process group."""
    if mode == "save":
        dcp.save(distributed(state, placement, mesh), storage_writer=ZTensorWriter(path, zstd=3, threads=1))
    elif mode == "save-native":
        dcp.save(distributed(state, placement, mesh), storage_writer=dcp.FileSystemWriter(path))
    elif mode == "save-native-zstd":
        from torch.distributed.checkpoint._extension import ZStandard

        writer = dcp.FileSystemWriter(path, _extensions=[ZStandard()])
        dcp.save(distributed(state, placement, mesh), storage_writer=writer)
    elif mode in ("save-hf", "save-hf-consolidated"):
        from torch.distributed.checkpoint import HuggingFaceStorageWriter

        # Tensors only: the safetensors writer puts serialized values before the file.
        tensors = {"model": distributed(state, placement, mesh)["model"]}
        if mode == "save-hf-consolidated":
            tensors["model"] = {k: v for k, v in tensors["model"].items() if v.dtype.is_floating_point}
        consolidate = mode == "save-hf-consolidated"
        writer = HuggingFaceStorageWriter(path, save_distributed=True, enable_consolidation=consolidate)
        dcp.save(tensors, storage_writer=writer)
    elif mode == "load":
        target = distributed(emptied(state), placement, mesh)
        dcp.load(target, storage_reader=ZTensorReader(path))
        check(target, state, placement)
    else:
        raise ValueError(f"no mode {mode}")


def say(line: str) -> None:
    """``line`` to standard output in one write, whole however the ranks' lines interleave."""
    sys.stdout.flush()
    os.write(1, (line.replace("\n", " ") + "\n").encode())


def main() -> None:
    """``load-alone PATH PLACEMENT`` in one process, or under ``torchrun`` any number of
    ``MODE PATH PLACEMENT`` jobs, one after the other in one process group (a launch costs
    seconds). Each rank prints a line per job: ``MODE PATH rank R of N: ok`` or ``... failed:
    WHY``; a job that fails does not stop the next."""
    state = full_state()
    if sys.argv[1] == "load-alone":
        path, placement = sys.argv[2:4]
        target = emptied(state)
        dcp.load(target, storage_reader=ZTensorReader(path), no_dist=True)
        check(target, state, placement)
        print("checked 1 rank")
        return
    # A rank that fails outside DCP's own collectives leaves the others waiting: bounded.
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    from torch.distributed.device_mesh import init_device_mesh

    world = dist.get_world_size()
    from torch.distributed.checkpoint.api import CheckpointException

    mesh = init_device_mesh("cpu", (world,))
    args = sys.argv[1:]
    failed = 0
    for i in range(0, len(args), 3):
        mode, path, placement = args[i : i + 3]
        said = f"{mode} {path} rank {dist.get_rank()} of {world}"
        try:
            job(mode, path, placement, state, mesh)
            dist.barrier()
            say(f"{said}: ok")
        except (Exception, CheckpointException) as e:  # noqa: BLE001 - told, and the next job runs
            say(f"{said}: failed: {type(e).__name__}: {e}")
            traceback.print_exc()
            failed += 1
            dist.barrier()
    dist.destroy_process_group()
    # Every job ran; the launch still fails when one did not go through.
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
