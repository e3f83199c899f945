"""ztensor_rs against the safetensors package on one checkpoint, in the same run.

Not a test: run it by hand on a release build (`maturin develop --release`), e.g.

    python crates/ztensor-py/bench/bench.py --gib 1 --runs 5

Each row runs both sides back to back per round (alternating which goes first) and reports the
median over the rounds. The page cache is warm for both (each file was just written). Rows:

- save_file raw: `safetensors.numpy.save_file` vs `ztensor_rs.save_file` (ours also syncs the
  file to disk before publishing it by rename; theirs leaves it in the page cache). The same
  row without the sync is given for comparison (`ZTENSOR_RS_NO_SYNC` is not a thing: we time the
  sync separately by `os.fsync` on their file).
- load_file raw + touch: both load every tensor and read every byte (`.sum()` over a uint8 view
  of every 4096th byte would touch pages only; a full sum reads the data as users do).
- open + touch (zero-copy): `safe_open` + `get_tensor` of every tensor + touching every page,
  against a plain `mmap` of the file touching every page (the ceiling).
- zstd-3 save and load (ours only; safetensors has no compression).
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import tempfile
import time

import numpy as np

import ztensor_rs

try:
    import safetensors.numpy as st
except ImportError:  # pragma: no cover
    raise SystemExit("pip install safetensors")


def checkpoint(total: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    tensors = {}
    size = 16 << 20  # bytes per tensor
    for i in range(max(1, total // size)):
        tensors[f"layer{i:03}.weight"] = (rng.standard_normal(size // 4, dtype=np.float32) * 0.02).reshape(-1, 1024)
    return tensors


def touch_pages(array: np.ndarray) -> int:
    flat = array.reshape(-1).view(np.uint8)
    return int(flat[::4096].sum()) if flat.size else 0


def timed(f) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    tensors = checkpoint(int(args.gib * (1 << 30)))
    nbytes = sum(t.nbytes for t in tensors.values())
    work = tempfile.mkdtemp(dir=args.dir)
    st_path = os.path.join(work, "m.safetensors")
    zt_path = os.path.join(work, "m.zt")
    zz_path = os.path.join(work, "m-zstd.zt")
    rows: dict[str, list[tuple[float, float]]] = {}

    def add(row: str, ours: float, peer: float) -> None:
        rows.setdefault(row, []).append((ours, peer))

    for r in range(args.runs):
        order = [0, 1] if r % 2 == 0 else [1, 0]
        t = {}
        for side in order:
            if side == 0:
                t["st_save"] = timed(lambda: st.save_file(tensors, st_path))
                t["st_sync"] = timed(lambda: os.fsync(fd := os.open(st_path, os.O_RDONLY)) or os.close(fd))
            else:
                t["zt_save"] = timed(lambda: ztensor_rs.save_file(tensors, zt_path))
        add("save_file raw", t["zt_save"], t["st_save"])
        add("save_file raw (theirs + fsync)", t["zt_save"], t["st_save"] + t["st_sync"])

        def st_load() -> None:
            for a in st.load_file(st_path).values():
                a.sum()

        def zt_load() -> None:
            for a in ztensor_rs.load_file(zt_path).values():
                a.sum()

        for side in order:
            t["st_load" if side == 0 else "zt_load"] = timed(st_load if side == 0 else zt_load)
        add("load_file raw + read every byte", t["zt_load"], t["st_load"])

        def zt_open_touch() -> None:
            with ztensor_rs.safe_open(zt_path) as f:
                for name in f.keys():
                    touch_pages(f.get_tensor(name))

        def mmap_touch() -> None:
            with open(zt_path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                view = np.frombuffer(m, dtype=np.uint8)
                int(view[::4096].sum())
                del view

        for side in order:
            t["mm" if side == 0 else "zo"] = timed(mmap_touch if side == 0 else zt_open_touch)
        add("open + touch every page (zero-copy) vs plain mmap", t["zo"], t["mm"])

        t["zz_save"] = timed(lambda: ztensor_rs.save_file(tensors, zz_path, zstd=3))

        def zz_load() -> None:
            for a in ztensor_rs.load_file(zz_path).values():
                a.sum()

        t["zz_load"] = timed(zz_load)
        add("zstd-3 save_file (ours; vs raw safetensors save)", t["zz_save"], t["st_save"])
        add("zstd-3 load_file + read (ours; vs raw safetensors load)", t["zz_load"], t["st_load"])
        print(f"round {r + 1}/{args.runs} done", flush=True)

    print(f"\n{len(tensors)} tensors, {nbytes / 1e9:.2f} GB, {os.cpu_count()} cores, {args.runs} rounds; "
          f"zstd file {os.path.getsize(zz_path) / 1e9:.2f} GB\n")
    print("| operation | ours s | peer s | ours GB/s | peer/ours (>= 1: ours faster) |")
    print("|---|---:|---:|---:|---:|")
    for row, pairs in rows.items():
        ours = statistics.median(p[0] for p in pairs)
        peer = statistics.median(p[1] for p in pairs)
        ratio = statistics.median(p[1] / p[0] for p in pairs)
        print(f"| {row} | {ours:.3f} | {peer:.3f} | {nbytes / ours / 1e9:.2f} | {ratio:.2f} |")
    for p in (st_path, zt_path, zz_path):
        os.remove(p)
    os.rmdir(work)


if __name__ == "__main__":
    main()
