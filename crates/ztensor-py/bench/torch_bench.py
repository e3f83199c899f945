"""ztensor_rs.torch against PyTorch's own tools, in the same run.

Not a test: `cargo xtask bench torch --mib 1024 --runs 3` builds the extension in release into
target/py-venv and runs it (by hand: `maturin develop --release`, then
`python crates/ztensor-py/bench/torch_bench.py --mib 1024 --runs 3`).

Rows (median over the rounds, both sides back to back, alternating which goes first; page
cache warm for both):

- load_file bf16 + touch: `safetensors.torch.load_file` vs `ztensor_rs.torch.load_file` of
  one checkpoint of bf16 tensors, from the `.safetensors` file and from a raw `.zt` of the same
  tensors; every value read (`.sum()` in float32).
- DCP save, 2 ranks: `FileSystemWriter` vs `ZTensorWriter` (raw, and zstd 3), time and size.
- Consolidation of a DCP checkpoint into one safetensors file: PyTorch's
  `dcp_to_torch_save` then `safetensors.torch.save_file`, vs `ztensor convert DIR
  OUT.safetensors`; time and peak memory (max RSS of the process that did it).
- The same for the safetensors shards DCP's `HuggingFaceStorageWriter` saves at 2 ranks
  (`save_distributed=True`): PyTorch's `consolidate_safetensors_files` with as many threads as
  the machine has CPUs, vs `ztensor convert DIR OUT.safetensors`, beside the machine's ceiling
  (the shards' bytes copied into one file by `cat`).

`--rows load,dcp,hf` picks the groups run (all by default; the consolidation of DCP's own files
needs `dcp`).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import safetensors.torch
import torch

import ztensor_rs.torch as zt

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]


def state(mib: int) -> dict:
    """Tensors of bf16 whose values look like weights (so zstd finds what it finds in models)."""
    g = torch.Generator().manual_seed(1)
    per = 16 << 20  # 16 MiB each
    count = max(1, (mib << 20) // per)
    side = int((per // 2) ** 0.5)
    return {f"layer{i}.weight": (torch.randn(side, side, generator=g) * 0.02).to(torch.bfloat16) for i in range(count)}


def timed(f) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def touch(tensors: dict) -> float:
    return float(sum(t.float().sum() for t in tensors.values()))


def row(name: str, theirs: list, ours: list, unit: str = "s") -> None:
    a, b = statistics.median(theirs), statistics.median(ours)
    print(f"{name:48s} theirs {a:8.3f} {unit}  ours {b:8.3f} {unit}  ratio (theirs/ours) {a / b:5.2f}x")


DCP_WORKER = '''
import sys, torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard
sys.path.insert(0, {here!r})
from torch_bench import state
from ztensor_rs.torch.dcp import ZTensorWriter
dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
rank, world = dist.get_rank(), dist.get_world_size()
sd = {{k: DTensor.from_local(torch.chunk(v, world, 0)[rank].clone(), mesh, [Shard(0)], run_check=False, shape=v.shape, stride=v.stride()) for k, v in state({mib}).items()}}
dist.barrier()
import time
start = time.perf_counter()
if sys.argv[1] == "native":
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(sys.argv[2]))
elif sys.argv[1] == "hf":
    from torch.distributed.checkpoint import HuggingFaceStorageWriter
    dcp.save(sd, storage_writer=HuggingFaceStorageWriter(sys.argv[2], save_distributed=True))
else:
    dcp.save(sd, storage_writer=ZTensorWriter(sys.argv[2], zstd=int(sys.argv[3]) or None, threads=1))
dist.barrier()
if rank == 0:
    print("took", time.perf_counter() - start)
dist.destroy_process_group()
'''


def dcp_save(kind: str, path: pathlib.Path, mib: int, zstd: int = 0) -> float:
    script = path.parent / "dcp_bench_worker.py"
    script.write_text(DCP_WORKER.format(here=str(HERE), mib=mib))
    shutil.rmtree(path, ignore_errors=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script), kind, str(path), str(zstd)],
        capture_output=True, text=True, env=env, check=True,
    )
    return float(next(line.split()[1] for line in out.stdout.splitlines() if line.startswith("took")))


def size_of(path: pathlib.Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def peak_of(args: list) -> tuple:
    """Wall time (s) and peak resident memory (KiB) of one process, by GNU time."""
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M", *args], capture_output=True, text=True, check=True)
    took, peak = out.stderr.strip().splitlines()[-1].split()
    return float(took), int(peak)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ztensor", default=str(REPO / "target/release/ztensor"))
    parser.add_argument("--rows", default="load,dcp,hf")
    a = parser.parse_args()
    rows = set(a.rows.split(","))
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, {a.mib} MiB of bf16")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        if "load" in rows:
            load_rows(tmp, a)
        if "dcp" in rows:
            dcp_rows(tmp, a)
        if "hf" in rows:
            hf_rows(tmp, a)


def load_rows(tmp: pathlib.Path, a) -> None:
    tensors = state(a.mib)
    st, raw = tmp / "m.safetensors", tmp / "m.zt"
    safetensors.torch.save_file(tensors, str(st))
    zt.save_file(tensors, raw)
    del tensors
    for name, path in (("safetensors", st), ("zt raw", raw)):
        theirs, ours = [], []
        for i in range(a.runs):
            sides = [(theirs, lambda: touch(safetensors.torch.load_file(str(st)))), (ours, lambda p=path: touch(zt.load_file(p)))]
            for times, f in sides if i % 2 == 0 else reversed(sides):
                times.append(timed(f))
        row(f"load_file + touch, from {name}", theirs, ours)


def dcp_rows(tmp: pathlib.Path, a) -> None:
    native, ours_raw, ours_z = tmp / "native", tmp / "zt-raw", tmp / "zt-zstd"
    t_native = [dcp_save("native", native, a.mib) for _ in range(a.runs)]
    t_raw = [dcp_save("zt", ours_raw, a.mib) for _ in range(a.runs)]
    t_z = [dcp_save("zt", ours_z, a.mib, 3) for _ in range(a.runs)]
    row("DCP save, 2 ranks: FileSystemWriter vs ZTensorWriter", t_native, t_raw)
    row("DCP save, 2 ranks: FileSystemWriter vs ZTensorWriter zstd 3", t_native, t_z)
    print(f"{'DCP sizes':48s} FileSystemWriter {size_of(native) >> 20} MiB, ZTensorWriter raw {size_of(ours_raw) >> 20} MiB, zstd 3 {size_of(ours_z) >> 20} MiB")

    theirs_script = tmp / "consolidate.py"
    theirs_script.write_text(
        "import sys, torch, safetensors.torch\n"
        "from torch.distributed.checkpoint.format_utils import dcp_to_torch_save\n"
        "dcp_to_torch_save(sys.argv[1], sys.argv[2])\n"
        "sd = torch.load(sys.argv[2], weights_only=False)\n"
        "safetensors.torch.save_file(sd, sys.argv[3])\n"
    )
    theirs, ours = [], []
    for i in range(a.runs):
        theirs.append(peak_of([sys.executable, str(theirs_script), str(native), str(tmp / "t.pt"), str(tmp / "t.safetensors")]))
        out = tmp / "o.safetensors"
        out.unlink(missing_ok=True)
        ours.append(peak_of([a.ztensor, "convert", str(native), str(out), "-q"]))
    row("consolidate DCP -> safetensors: time", [t for t, _ in theirs], [t for t, _ in ours])
    print(f"{'consolidate DCP -> safetensors: peak RSS':48s} theirs {max(r for _, r in theirs) >> 10} MiB  ours {max(r for _, r in ours) >> 10} MiB")


def hf_rows(tmp: pathlib.Path, a) -> None:
    shards = tmp / "hf"
    t_hf = [dcp_save("hf", shards, a.mib) for _ in range(a.runs)]
    print(f"{'DCP save, 2 ranks, HuggingFaceStorageWriter':48s} {statistics.median(t_hf):8.3f} s, {size_of(shards) >> 20} MiB")
    theirs_script = tmp / "consolidate_hf.py"
    theirs_script.write_text(
        "import os, sys, json\n"
        "from torch.distributed.checkpoint._consolidate_hf_safetensors import consolidate_safetensors_files\n"
        "names = json.loads(sys.argv[3])\n"
        "consolidate_safetensors_files(sys.argv[1], sys.argv[2], dict.fromkeys(names, 1), num_threads=os.cpu_count())\n"
    )
    names = json.dumps(sorted(state_names(a.mib)))
    theirs, ours, ceiling = [], [], []
    for i in range(a.runs):
        # The machine's ceiling: the shards' bytes copied into one file.
        ceiling.append(peak_of(["sh", "-c", f"cat {shards}/*.safetensors > {tmp}/cat.bin"]))
        out_dir = tmp / "hf-out"
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir()
        out = tmp / "hf.safetensors"
        out.unlink(missing_ok=True)
        sides = [
            (theirs, [sys.executable, str(theirs_script), str(shards), str(out_dir), names]),
            (ours, [a.ztensor, "convert", str(shards), str(out), "-q"]),
        ]
        for runs, args in sides if i % 2 == 0 else reversed(sides):
            runs.append(peak_of(args))
    # The same tensors either way.
    mine = safetensors.torch.load_file(str(out))
    torch_own = safetensors.torch.load_file(str(out_dir / "model-00001-of-00001.safetensors"))
    assert mine.keys() == torch_own.keys() and all(torch.equal(mine[k], torch_own[k]) for k in mine)
    row("consolidate HF shards -> safetensors: time", [t for t, _ in theirs], [t for t, _ in ours])
    row("  ... the shards' bytes copied (cat) vs ours", [t for t, _ in ceiling], [t for t, _ in ours])
    print(f"{'consolidate HF shards -> safetensors: peak RSS':48s} theirs {max(r for _, r in theirs) >> 10} MiB  ours {max(r for _, r in ours) >> 10} MiB")


def state_names(mib: int) -> list:
    per = 16 << 20
    return [f"layer{i}.weight" for i in range(max(1, (mib << 20) // per))]


if __name__ == "__main__":
    main()
