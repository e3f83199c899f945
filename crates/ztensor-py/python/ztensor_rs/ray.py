"""Every unit of a sharded conversion planned by ``ztensor plan`` as a Ray task, then the
checkpoint finalized: one command on any node of a Ray cluster. ::

    ztensor plan s3://ckpt/model.safetensors.index.json s3://ckpt/out/ --zstd 3 \\
        -o s3://ckpt/plans/plan.json
    python -m ztensor_rs.ray s3://ckpt/plans/plan.json --address auto --cpus 4

The plan, its input and its output may be local paths (the same on every node: a shared
filesystem) or URLs in object storage (each node needs only to reach the bucket, with
credentials in its environment as the AWS, Google and Azure tools take them). Every node needs
``ztensor-rs`` installed; no other tool.

Each task runs :func:`ztensor_rs.run_unit` on ``--cpus`` threads: it publishes its shard whole,
then a receipt beside it. A task whose worker or node dies is run again by Ray (``--retries``
times); a unit that finished before is then found done and verified rather than written twice,
so a retry is safe whenever it comes. When every unit is done, :func:`ztensor_rs.finalize`
checks each receipt and shard and writes the index. :func:`run` does the same from Python.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _native

PathLike = Union[str, "os.PathLike[str]"]


def _unit(plan: str, unit: int, threads: int) -> Dict[str, Any]:
    # What each task runs, on whichever node Ray puts it.
    return _native.run_unit(plan, unit, threads)


def run(
    plan: PathLike,
    *,
    address: Optional[str] = None,
    cpus: int = 1,
    retries: int = 3,
    deep: bool = False,
) -> Dict[str, Any]:
    """Runs every unit of the plan at ``plan`` as a Ray task (``cpus`` CPUs each, its
    compression on as many threads; a task whose worker or node dies is retried up to
    ``retries`` times), then finalizes the checkpoint (``deep``: each shard's digest
    recomputed). Connects to the cluster at ``address`` (``"auto"``: the one this node is part
    of; ``None``: Ray's default, a local one if there is none) unless Ray is initialized
    already. Returns ``{"units": [receipt, ...], "index": where the index went}``, each
    receipt as :func:`ztensor_rs.run_unit` returns it."""
    import ray  # Only this module needs Ray.

    if cpus < 1:
        raise ValueError(f"cpus={cpus}: each task needs at least one CPU")
    if retries < 0:
        raise ValueError(f"retries={retries}: a count")
    plan = os.fspath(plan)
    units = _native.plan_units(plan)
    if not ray.is_initialized():
        ray.init(address=address)
    task = ray.remote(num_cpus=cpus, max_retries=retries)(_unit)
    receipts: List[Dict[str, Any]] = ray.get([task.remote(plan, k, cpus) for k in range(units)])
    return {"units": receipts, "index": _native.finalize(plan, deep)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m ztensor_rs.ray PLAN``: :func:`run`, its receipts printed as lines of text
    (or one JSON document with ``--json``). Exit status 0 when the index is written, 1 when a
    unit or the finalization failed (the error on standard error)."""
    parser = argparse.ArgumentParser(
        prog="python -m ztensor_rs.ray",
        description="Run every unit of a ztensor plan as a Ray task, then finalize the checkpoint.",
    )
    parser.add_argument("plan", help="the plan (ztensor plan -o): a path, or an s3://, gs:// or az:// URL")
    parser.add_argument(
        "--address", help='the Ray cluster to join ("auto": the one this node is part of)'
    )
    parser.add_argument(
        "--cpus", type=int, default=1, help="CPUs each task asks Ray for, and its compression threads"
    )
    parser.add_argument(
        "--retries", type=int, default=3, help="times a task whose worker or node died is run again"
    )
    parser.add_argument("--deep", action="store_true", help="recompute each shard's digest when finalizing")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    from ztensor_rs._errors import ZTensorError

    # The module by its name (not `__main__`, as `python -m` runs it), so that Ray's tasks find
    # their function by reference on every node.
    from ztensor_rs.ray import run

    try:
        done = run(args.plan, address=args.address, cpus=args.cpus, retries=args.retries, deep=args.deep)
    except (ZTensorError, OSError, ValueError) as e:
        print(f"python -m ztensor_rs.ray: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # A task's own error, as Ray raises it (RayTaskError and kin).
        cause = getattr(e, "cause", None) or e
        print(f"python -m ztensor_rs.ray: {type(cause).__name__}: {cause}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(done, indent=2))
    else:
        for r in done["units"]:
            how = "wrote" if r["fresh"] else "found done"
            print(f"unit {r['unit']}: {how} {r['shard']} ({r['objects']} objects, {r['size']} bytes)")
        print(f"index: {done['index']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
