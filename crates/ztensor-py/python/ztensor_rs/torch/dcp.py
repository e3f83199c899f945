"""A storage layer for PyTorch Distributed Checkpoint (``torch.distributed.checkpoint``) that
saves into zTensor::

    import torch.distributed.checkpoint as dcp
    from ztensor_rs.torch.dcp import ZTensorReader, ZTensorWriter

    dcp.save(state_dict, storage_writer=ZTensorWriter("ckpt", zstd=3))
    dcp.load(state_dict, storage_reader=ZTensorReader("ckpt"))

Each rank writes its own zTensor shard of the directory (``model-0000R-of-0000N.zt``), on its
cores (``threads``), compressed (``zstd``) and digested (``digest``); the coordinator then
writes ``model.zt.index.json``, the index of a sharded zTensor checkpoint (so every ``ztensor``
command reads the directory) with what DCP needs to load it again under ``"dcp"``: each
entry's type, global size and chunks, and the planner's data. Nothing is pickled into the
index, and reading it runs no code. ``dcp.load`` with :class:`ZTensorReader` reshards: another
world size, other placements, or one process with ``no_dist=True``.

Each chunk is an object named after its entry (``layer.weight``), with its offsets in the
name when it is one of several (``layer.weight@0,512``); an entry that is not a tensor is kept
as the bytes DCP serialized it to (``u8``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from torch.distributed.checkpoint.metadata import (
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    StorageMeta,
    TensorProperties,
    TensorStorageMetadata,
)
from torch.distributed.checkpoint.planner import (
    LoadItemType,
    LoadPlan,
    LoadPlanner,
    SavePlan,
    SavePlanner,
    WriteItemType,
)
from torch.distributed.checkpoint.storage import StorageReader, StorageWriter, WriteResult
from torch.futures import Future

from .._errors import FormatError, UnsupportedError
from . import safe_open, save_file

__all__ = ["ZTensorWriter", "ZTensorReader"]

INDEX = "model.zt.index.json"
"""The index the coordinator writes, the one a sharded zTensor checkpoint is read by."""

_FORMAT = 1
"""The version of the ``"dcp"`` section of the index."""


def _shard_name(rank: int, count: int) -> str:
    width = max(5, len(str(count)))
    return f"model-{rank + 1:0{width}d}-of-{count:0{width}d}.zt"


def _object_name(fqn: str, offsets: Optional[Tuple[int, ...]], whole: bool) -> str:
    if whole or offsets is None:
        return fqn
    return f"{fqn}@{','.join(str(o) for o in offsets)}"


@dataclasses.dataclass(frozen=True)
class _Stored:
    """Where one item of the checkpoint lies: its shard and object, and (in the results a rank
    sends the coordinator) its shard's length and SHA-256."""

    shard: str
    object: str
    shard_size: int = 0
    shard_digest: str = ""


class ZTensorWriter(StorageWriter):
    """Writes a DCP checkpoint into the directory ``path`` as a sharded zTensor checkpoint.

    Args:
        path: the checkpoint's directory (made if missing; its index and shards are replaced).
        zstd: compress each tensor with zstd at this level (1-22); raw when ``None``.
        digest: ``"sha256"`` (the default), ``"crc32c"``, ``"blake3"`` or ``None``, per tensor.
        threads: the threads each rank compresses and digests on (default: one per core).
    """

    def __init__(self, path: Union[str, os.PathLike], *, zstd: Optional[int] = None, digest: Optional[str] = "sha256", threads: Optional[int] = None) -> None:
        super().__init__()
        self.path = Path(path)
        self.zstd = zstd
        self.digest = digest
        self.threads = threads
        self.is_coordinator = False

    def reset(self, checkpoint_id: Union[str, os.PathLike, None] = None) -> None:
        if checkpoint_id is not None:
            self.path = Path(checkpoint_id)

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.is_coordinator = is_coordinator

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        self.path.mkdir(parents=True, exist_ok=True)
        return plan

    def prepare_global_plan(self, plans: List[SavePlan]) -> List[SavePlan]:
        # Each rank's shard, by its place among the plans.
        return [dataclasses.replace(plan, storage_data=_shard_name(i, len(plans))) for i, plan in enumerate(plans)]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> "Future[List[WriteResult]]":
        shard = plan.storage_data
        if not isinstance(shard, str):
            raise FormatError("ZTensorWriter: the global plan named no shard for this rank")
        tensors: Dict[str, torch.Tensor] = {}
        placed: List[Tuple[Any, str, int]] = []
        for item in plan.items:
            data = planner.resolve_data(item)
            if item.type == WriteItemType.BYTE_IO:
                raw = data.getvalue() if isinstance(data, io.BytesIO) else bytes(data)
                tensor = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
                name = item.index.fqn
            else:
                tensor = data.detach()
                chunk = item.tensor_data.chunk
                whole = list(chunk.sizes) == list(item.tensor_data.size)
                name = _object_name(item.index.fqn, tuple(chunk.offsets), whole)
            if name in tensors:
                raise FormatError(f"ZTensorWriter: two items of this rank are both named {name!r}")
            tensors[name] = tensor
            placed.append((item, name, tensor.numel() * tensor.element_size()))
        target = self.path / shard
        save_file(tensors, target, zstd=self.zstd, digest=self.digest, threads=self.threads)
        size, digest = _sha256_of(target)
        results = [WriteResult(index=item.index, size_in_bytes=n, storage_data=_Stored(shard, name, size, digest)) for item, name, n in placed]
        done: Future = Future()
        done.set_result(results)
        return done

    def finish(self, metadata: Metadata, results: List[List[WriteResult]]) -> None:
        shards: Dict[str, Dict[str, Any]] = {}
        weight_map: Dict[str, str] = {}
        where: Dict[Tuple[str, Optional[Tuple[int, ...]]], str] = {}
        total = 0
        for rank_results in results:
            for result in rank_results:
                stored: _Stored = result.storage_data
                shards[stored.shard] = {"size": stored.shard_size, "digest": stored.shard_digest}
                weight_map[stored.object] = stored.shard
                offset = tuple(result.index.offset) if result.index.offset is not None else None
                where[(result.index.fqn, offset)] = stored.object
                total += result.size_in_bytes
        entries: Dict[str, Any] = {}
        for fqn, md in metadata.state_dict_metadata.items():
            if isinstance(md, BytesStorageMetadata):
                entries[fqn] = {"kind": "bytes", "object": where[(fqn, None)]}
                continue
            props = md.properties
            entries[fqn] = {
                "kind": "tensor",
                "dtype": str(props.dtype).removeprefix("torch."),
                "requires_grad": bool(props.requires_grad),
                "size": list(md.size),
                "chunks": [
                    {"offsets": list(c.offsets), "sizes": list(c.sizes), "object": where[(fqn, tuple(c.offsets))]}
                    for c in md.chunks
                ],
            }
        index = {
            "metadata": {"total_size": total},
            "shards": dict(sorted(shards.items())),
            "weight_map": dict(sorted(weight_map.items())),
            "dcp": {"format": _FORMAT, "version": metadata.version, "state_dict": entries, "planner_data": _planner_data_out(metadata.planner_data)},
        }
        temporary = self.path / f".{INDEX}.{os.getpid()}.tmp"
        with open(temporary, "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, self.path / INDEX)

    def storage_meta(self) -> Optional[StorageMeta]:
        return StorageMeta(checkpoint_id=str(self.path))

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Union[str, os.PathLike]) -> bool:
        return not str(checkpoint_id).startswith(("s3://", "gs://", "az://", "http://", "https://"))


class ZTensorReader(StorageReader):
    """Reads a DCP checkpoint a :class:`ZTensorWriter` wrote (the directory ``path``), for
    ``dcp.load`` at any world size and placement: each read takes the part of a chunk it needs,
    raw chunks of a mapped shard without decoding the rest."""

    def __init__(self, path: Union[str, os.PathLike]) -> None:
        super().__init__()
        self.path = Path(path)
        self.storage_data: Dict[MetadataIndex, _Stored] = {}
        self.load_id: Optional[str] = None

    def reset(self, checkpoint_id: Union[str, os.PathLike, None] = None) -> None:
        self.storage_data = {}
        if checkpoint_id is not None:
            self.path = Path(checkpoint_id)

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        index_path = self.path / INDEX
        with open(index_path) as f:
            index = json.load(f)
        section = index.get("dcp") if isinstance(index, dict) else None
        if not isinstance(section, dict) or section.get("format") != _FORMAT:
            raise FormatError(f"{index_path}: not a checkpoint ZTensorWriter wrote (no \"dcp\" section of format {_FORMAT})")
        weight_map = index.get("weight_map", {})
        state: Dict[str, Any] = {}
        storage: Dict[MetadataIndex, _Stored] = {}
        for fqn, entry in section["state_dict"].items():
            if entry["kind"] == "bytes":
                state[fqn] = BytesStorageMetadata()
                storage[MetadataIndex(fqn)] = _Stored(_shard_of(weight_map, entry["object"], index_path), entry["object"])
                continue
            dtype = getattr(torch, entry["dtype"], None)
            if not isinstance(dtype, torch.dtype):
                raise UnsupportedError(f"{index_path}: {fqn!r} has dtype {entry['dtype']!r}, which this torch lacks")
            chunks = []
            for c in entry["chunks"]:
                chunks.append(ChunkStorageMetadata(offsets=torch.Size(c["offsets"]), sizes=torch.Size(c["sizes"])))
                at = MetadataIndex(fqn, torch.Size(c["offsets"]))
                storage[at] = _Stored(_shard_of(weight_map, c["object"], index_path), c["object"])
            state[fqn] = TensorStorageMetadata(
                properties=TensorProperties(dtype=dtype, requires_grad=bool(entry.get("requires_grad", False))),
                size=torch.Size(entry["size"]),
                chunks=chunks,
            )
        metadata = Metadata(state_dict_metadata=state, planner_data=_planner_data_in(section.get("planner_data")), storage_data=storage)
        if section.get("version") is not None:
            metadata.version = section["version"]
        metadata.storage_meta = StorageMeta(checkpoint_id=str(self.path), load_id=self.load_id)
        return metadata

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.storage_data = metadata.storage_data

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: List[LoadPlan]) -> List[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> "Future[None]":
        by_shard: Dict[str, List[Any]] = {}
        for item in plan.items:
            by_shard.setdefault(self.storage_data[item.storage_index].shard, []).append(item)
        for shard, items in by_shard.items():
            with safe_open(self.path / shard, framework="pt") as f:
                for item in items:
                    stored = self.storage_data[item.storage_index]
                    chunk = f.get_tensor(stored.object)
                    if item.type == LoadItemType.BYTE_IO:
                        planner.load_bytes(item, io.BytesIO(chunk.numpy().tobytes()))
                        continue
                    part = chunk[tuple(slice(o, o + n) for o, n in zip(item.storage_offsets, item.lengths))]
                    target = planner.resolve_tensor(item).detach()
                    if target.shape != part.shape:
                        raise FormatError(f"{shard}: {stored.object!r} gives {list(part.shape)} where the plan reads {list(target.shape)}")
                    target.copy_(part)
                    planner.commit_tensor(item, target)
        done: Future = Future()
        done.set_result(None)
        return done

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Union[str, os.PathLike]) -> bool:
        return (Path(checkpoint_id) / INDEX).is_file()


def _shard_of(weight_map: Dict[str, str], name: str, index_path: Path) -> str:
    shard = weight_map.get(name)
    if not isinstance(shard, str) or "/" in shard or shard in ("", ".", ".."):
        raise FormatError(f"{index_path}: object {name!r} is in no shard beside the index")
    return shard


def _sha256_of(path: Path) -> Tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
            size += len(chunk)
    return size, "sha256:" + h.hexdigest()


def _planner_data_out(data: Any) -> Any:
    """The planner's data as JSON: the default planners' map of flattened names to the path of
    keys and list positions they came from."""
    if data is None:
        return None
    if isinstance(data, dict) and all(isinstance(k, str) and isinstance(v, tuple) and all(isinstance(p, (str, int)) for p in v) for k, v in data.items()):
        return {k: list(v) for k, v in data.items()}
    raise UnsupportedError("ZTensorWriter keeps the default planners' data (names to paths); this planner's is of another shape")


def _planner_data_in(data: Any) -> Any:
    if data is None:
        return None
    return {k: tuple(v) for k, v in data.items()}
