"""A sharded conversion planned by ``ztensor plan``, run from Python: one unit at a time on
any machine (a scheduler's task), then finalized. :mod:`ztensor_rs.ray` runs them as Ray
tasks."""

from __future__ import annotations

import os
from typing import Any, Dict, Union

from . import _native

PathLike = Union[str, "os.PathLike[str]"]


def plan_units(plan: PathLike) -> int:
    """How many units the plan at ``plan`` (a path, or an ``s3://``, ``gs://`` or ``az://``
    URL) has: its units are numbered ``0`` to ``n - 1``."""
    return _native.plan_units(os.fspath(plan))


def run_unit(plan: PathLike, unit: int, *, threads: int = 0) -> Dict[str, Any]:
    """Writes unit ``unit`` of the plan at ``plan``, as ``ztensor run PLAN --unit K`` does: its
    shard published whole, then its receipt beside it; a unit found done is verified instead,
    so running one again (a scheduler's retry) writes nothing twice. The input and output are
    where the plan says (local paths, or URLs in object storage). ``threads`` compression
    threads (0: one per core), with the GIL released. Returns the receipt: ``unit``,
    ``fresh`` (written now rather than found done), ``shard``, ``objects``, ``size`` and
    ``digest``."""
    return _native.run_unit(os.fspath(plan), unit, threads)


def finalize(plan: PathLike, *, deep: bool = False) -> str:
    """Checks every unit of the plan at ``plan`` (its receipt and its shard's size; ``deep``:
    each shard's digest recomputed) and writes the checkpoint's index, as ``ztensor finalize``
    does. Returns where the index went. Raises :class:`ZTensorError` naming every unit not
    done."""
    return _native.finalize(os.fspath(plan), deep)
