#!/usr/bin/env python3
"""Object storage, measured against local S3 servers (moto's, and s3s-fs when installed),
both sides in the same run.

Rows (each the median of ZT_BENCH_RUNS runs, ours and the peer alternating):

1. an object to a local file: `ztensor convert s3://B/model.zt model.zt` against boto3's
   `download_file` of the same object (goal: ours/peer >= 1.0);
2. an object to an object: `ztensor convert s3://B/model.safetensors s3://B/out.zt --zstd 3`
   against boto3 download + `ztensor convert` on the local file + boto3 upload (goal: faster);
3. requests and bytes an `info` costs, for zTensor 1.2, zTensor 2 and safetensors objects
   (goal: <= 3 requests, <= 256 KiB);
4. bytes fetched by the converts of rows 1 and 2, against the input's size (goal: <= 1.05x).

Run by `cargo xtask bench remote` (which builds the release CLI and uses target/py-venv, made
by `cargo xtask test`). Environment: ZT_BENCH_BYTES (checkpoint size, default 1 GiB),
ZT_BENCH_RUNS (default 3), ZT_BENCH_CLI (the ztensor binary), ZTENSOR_MOTO_SERVER (the
moto_server program), ZTENSOR_S3S_FS (the s3s-fs program), ZT_BENCH_SERVERS (which servers,
comma-separated: moto, s3s-fs; default both), ZT_BENCH_PIN (0: servers and clients share
every core). Writes a table per server and target/bench/remote.json.

Where the machine has two cores or more, the server runs on the upper half of them and the
clients (ours and the peer) on the lower half, as a server elsewhere would take no CPU from
them: on two cores, sharing both made the server's own CPU vary with the client's (4.5-6 s for
the same 1 GiB) and the rows with it. Beside each row's wall time, the CPU time the client
spent (user + system, all threads): what a machine reading many checkpoints at once runs out of.
"""

import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
import numpy as np
from safetensors.numpy import save_file

ROOT = Path(__file__).resolve().parent.parent
CLI = os.environ.get("ZT_BENCH_CLI", str(ROOT / "target/release/ztensor"))
SIZE = int(os.environ.get("ZT_BENCH_BYTES", 1 << 30))
RUNS = max(1, int(os.environ.get("ZT_BENCH_RUNS", 3)))
BUCKET = "bench"

# The cores the servers get, and those the clients keep (None: no pinning).
_CPUS = sorted(os.sched_getaffinity(0))
PIN = (None if len(_CPUS) < 2 or os.environ.get("ZT_BENCH_PIN") == "0"
       else (set(_CPUS[len(_CPUS) // 2:]), set(_CPUS[:len(_CPUS) // 2])))


def server_cores():
    """For a server's Popen: its process, and every thread it starts, on the servers' cores."""
    if PIN:
        os.sched_setaffinity(0, PIN[0])


def cpu_time():
    """User + system seconds of this process and of its children waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto():
    program = os.environ.get("ZTENSOR_MOTO_SERVER") or shutil.which("moto_server")
    if not program:
        program = str(Path(sys.executable).parent / "moto_server")
    port = free_port()
    child = subprocess.Popen(
        [program, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=server_cores,
    )
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return child, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    child.kill()
    sys.exit("moto_server did not listen within 30 s")


def start_s3s(program):
    """s3s-fs (an S3 server in Rust, from crates.io: `cargo install s3s-fs --features
    binary`), on a fresh directory."""
    port = free_port()
    data = tempfile.mkdtemp(prefix="zt-bench-s3s-", dir=ROOT / "target")
    child = subprocess.Popen(
        [program, "--host", "127.0.0.1", "--port", str(port), "--access-key", "testing",
         "--secret-key", "testing", data],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=server_cores,
    )
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            child.data = data
            return child, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    child.kill()
    sys.exit("s3s-fs did not listen within 30 s")


def checkpoint(path):
    """A safetensors file of SIZE bytes: bf16-like halves and f32 tensors of N(0, 0.02)."""
    rng = np.random.default_rng(7)
    tensors, left, i = {}, SIZE, 0
    while left > 0:
        n = min(left, 64 << 20) // 4
        if n == 0:
            break
        tensors[f"layers.{i}.weight"] = rng.normal(0, 0.02, n).astype(np.float32)
        left -= n * 4
        i += 1
    save_file(tensors, str(path))


def timed(command, env, cpu=None):
    """Runs `command`: its wall time, and its CPU time appended to `cpu` when given."""
    started, spent = time.perf_counter(), cpu_time()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    took = time.perf_counter() - started
    if cpu is not None:
        cpu.append(cpu_time() - spent)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr}")
    return took, done


def transfer(stderr, url):
    """The requests and bytes ZTENSOR_REMOTE_STATS reported for `url`."""
    for line in stderr.splitlines():
        if line.startswith(f"ztensor: {url}: "):
            numbers = [int(w) for w in line.split() if w.isdigit()]
            return numbers[0], numbers[1]
    sys.exit(f"no transfer report for {url} in: {stderr}")


def measure(server, start, work):
    """The rows and checks against one server (started by `start`, stopped at the end)."""
    child, endpoint = start()
    key = "testing"
    env = dict(
        os.environ,
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID=key,
        AWS_SECRET_ACCESS_KEY=key,
        AWS_REGION="us-east-1",
        ZTENSOR_REMOTE_STATS="1",
    )
    env.pop("AWS_PROFILE", None)
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key,
                      aws_secret_access_key=key, region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    rows, checks = [], {}
    try:
        st, zt, zt2 = work / "model.safetensors", work / "model.zt", work / "model2.zt"
        copy = work / "copy.zt"
        for path in (st, zt, zt2):
            s3.upload_file(str(path), BUCKET, path.name)
        size_zt, size_st = zt.stat().st_size, st.stat().st_size
        pinned = (f"server on cores {sorted(PIN[0])}, clients on {sorted(PIN[1])}" if PIN
                  else "server and clients on every core")
        print(f"{server} at {endpoint}: checkpoint of {size_st} bytes of safetensors, "
              f"{size_zt} of zTensor 1.2; {os.cpu_count()} cores, {pinned}; {RUNS} runs")

        # Row 1: an object to a local file.
        ours, peer, fetched, cpu = [], [], [], ([], [])
        for _ in range(RUNS):
            out = work / "out.zt"
            took, done = timed([CLI, "convert", f"s3://{BUCKET}/model.zt", str(out), "-q"], env,
                               cpu[0])
            ours.append(took)
            fetched.append(transfer(done.stderr, f"s3://{BUCKET}/model.zt")[1] / size_zt)
            assert out.read_bytes() == copy.read_bytes(), "differs from the local conversion"
            out.unlink()
            started, spent = time.perf_counter(), cpu_time()
            s3.download_file(BUCKET, "model.zt", str(out))
            peer.append(time.perf_counter() - started)
            cpu[1].append(cpu_time() - spent)
            out.unlink()
        rows.append(("s3:// -> local file (1.2 copy)", ours, peer,
                     "boto3 download_file", 1.0, cpu))
        checks["convert s3:// -> local: bytes fetched / object"] = (max(fetched), 1.05)

        # Row 2: an object to an object, zstd on the way.
        ours, peer, fetched, cpu = [], [], [], ([], [])
        for _ in range(RUNS):
            url = f"s3://{BUCKET}/model.safetensors"
            took, done = timed(
                [CLI, "convert", url, f"s3://{BUCKET}/out.zt", "--zstd", "3", "-q"], env, cpu[0])
            ours.append(took)
            fetched.append(transfer(done.stderr, url)[1] / size_st)
            local_in, local_out = work / "in.safetensors", work / "out-local.zt"
            started, spent = time.perf_counter(), cpu_time()
            s3.download_file(BUCKET, "model.safetensors", str(local_in))
            subprocess.run([CLI, "convert", str(local_in), str(local_out), "--zstd", "3", "-q"],
                           check=True, env=env)
            s3.upload_file(str(local_out), BUCKET, "out-local.zt")
            peer.append(time.perf_counter() - started)
            cpu[1].append(cpu_time() - spent)
            mine = s3.get_object(Bucket=BUCKET, Key="out.zt")["Body"].read()
            assert mine == local_out.read_bytes(), "the object differs from the local conversion"
            local_in.unlink()
            local_out.unlink()
        rows.append(("s3:// -> s3:// convert --zstd 3", ours, peer,
                     "boto3 download + convert + boto3 upload", 1.0, cpu))
        checks["convert s3:// -> s3://: bytes fetched / object"] = (max(fetched), 1.05)

        # Row 3: what an info costs.
        for name in ("model.zt", "model2.zt", "model.safetensors"):
            url = f"s3://{BUCKET}/{name}"
            _, done = timed([CLI, "info", url], env)
            requests, received = transfer(done.stderr, url)
            checks[f"info {name}: requests"] = (requests, 3)
            checks[f"info {name}: KiB"] = (received / 1024, 256)
    finally:
        child.terminate()
        child.wait()
        if hasattr(child, "data"):
            shutil.rmtree(child.data, ignore_errors=True)
    return rows, checks


def servers():
    """The servers measured: moto's (what the tests start) always; s3s-fs when installed
    (ZTENSOR_S3S_FS, or target/s3s/bin/s3s-fs, which `cargo xtask bench remote` installs from
    crates.io): a server in Rust on all cores, not itself the bound as moto (one Python
    process) is, so its rows show what the transfer does."""
    out = [("moto", start_moto)]
    program = os.environ.get("ZTENSOR_S3S_FS") or str(ROOT / "target/s3s/bin/s3s-fs")
    if Path(program).exists():
        out.append(("s3s-fs", lambda: start_s3s(program)))
    elif os.environ.get("ZTENSOR_REQUIRE_S3S_FS"):
        sys.exit(f"no s3s-fs at {program}")
    # ZT_BENCH_SERVERS=s3s-fs (say) measures only those named.
    chosen = os.environ.get("ZT_BENCH_SERVERS")
    if chosen:
        out = [(name, start) for name, start in out if name in chosen.split(",")]
    return out


def main():
    work = Path(tempfile.mkdtemp(prefix="zt-bench-remote-", dir=ROOT / "target"))
    report = {"bytes": SIZE, "runs": RUNS, "cores": os.cpu_count(), "servers": {},
              "pinned": {"server": sorted(PIN[0]), "clients": sorted(PIN[1])} if PIN else None}
    if PIN:
        # The clients (this process, boto3's threads, the CLI it starts) on their half.
        os.sched_setaffinity(0, PIN[1])
    try:
        st, zt, zt2 = work / "model.safetensors", work / "model.zt", work / "model2.zt"
        checkpoint(st)
        copy = work / "copy.zt"
        env = dict(os.environ)
        for args in ([str(st), str(zt)], [str(st), str(zt2), "--to", "2"], [str(zt), str(copy)]):
            timed([CLI, "convert", *args, "-q"], env)
        measured = [(name, *measure(name, start, work)) for name, start in servers()]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    for server, rows, checks in measured:
        print(f"\n{server}")
        print(f"{'operation':<36} {'ours':>9} {'peer':>9} {'peer/ours':>9}  goal         "
              f"{'CPU ours':>9} {'CPU peer':>9}  peer")
        entry = {"rows": [], "checks": []}
        for name, ours, peer, what, goal, cpu in rows:
            # The median of the per-run ratios: each pair measured back to back.
            ratio = statistics.median(p / o for o, p in zip(ours, peer))
            verdict = "met" if ratio >= goal else "missed"
            print(f"{name:<36} {statistics.median(ours):8.2f}s {statistics.median(peer):8.2f}s "
                  f"{ratio:8.2f}x  >= {goal} {verdict:<6} "
                  f"{statistics.median(cpu[0]):8.2f}s {statistics.median(cpu[1]):8.2f}s  ({what})")
            entry["rows"].append({"operation": name, "ours_s": ours, "peer_s": peer, "peer": what,
                                  "ratio": ratio, "goal": goal, "met": ratio >= goal,
                                  "ours_cpu_s": cpu[0], "peer_cpu_s": cpu[1]})
        print()
        for name, (value, bound) in checks.items():
            verdict = "met" if value <= bound else "missed"
            print(f"{name:<52} {value:10.3f} (<= {bound}) {verdict}")
            entry["checks"].append({"check": name, "value": value, "bound": bound,
                                    "met": value <= bound})
        report["servers"][server] = entry
    out = ROOT / "target/bench/remote.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
