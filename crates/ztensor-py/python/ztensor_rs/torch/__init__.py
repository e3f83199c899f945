"""PyTorch tensors, with the signatures of ``safetensors.torch``::

    import torch
    from ztensor_rs.torch import load_file, save_file, safe_open

    save_file({"w": torch.randn(4, 4, dtype=torch.bfloat16)}, "model.zt", zstd=3)
    tensors = load_file("model.zt")
    with safe_open("model.safetensors", framework="pt") as f:
        w = f.get_slice("w")[0:2]

Every input format the package reads (zTensor 0.1/1.x/2, safetensors, TensorBuffers, NumPy,
GGUF, PyTorch files), every dtype both sides have, exactly: bf16, f16, f32, f64, FP8 E4M3 and
E5M2 (and their ``fnuz`` variants), complex64/128, bool, signed and unsigned integers.

Raw little-endian tensor data of a memory-mapped file becomes a tensor without a copy: the
tensors of a file share one private copy-on-write map of it (``torch.UntypedStorage.from_file``
with ``shared=False``), so a tensor's pages are read from the file when first touched, and
writing into such a tensor changes this process's copy of those pages only, never the file,
another process's view or a tensor read again from the file. The file must not be changed in
place while its tensors live (files this package writes are replaced by rename, never changed
in place); the map is checked to be of the file that was opened and verified. Anything else
(compressed, byte-swapped or unaligned data, bytes given to :func:`load`) is decoded into
memory once, on every core for :func:`load_file`, and the tensor takes that memory without a
further copy.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch

from .. import _api, _native
from .._api import PathLike
from .._errors import UnsupportedError

__all__ = ["load_file", "save_file", "load", "save", "safe_open"]

# (storage type, logical type) -> torch dtype.
_DTYPES: Dict[Tuple[str, Optional[str]], torch.dtype] = {
    ("f64", None): torch.float64,
    ("f32", None): torch.float32,
    ("f16", None): torch.float16,
    ("bf16", None): torch.bfloat16,
    ("i64", None): torch.int64,
    ("i32", None): torch.int32,
    ("i16", None): torch.int16,
    ("i8", None): torch.int8,
    ("u8", None): torch.uint8,
    ("bool", None): torch.bool,
    ("f32", "complex64"): torch.complex64,
    ("f64", "complex128"): torch.complex128,
}
for _storage, _name in (("u16", "uint16"), ("u32", "uint32"), ("u64", "uint64")):
    if hasattr(torch, _name):
        _DTYPES[(_storage, None)] = getattr(torch, _name)
for _logical, _name in (
    ("f8_e4m3fn", "float8_e4m3fn"),
    ("f8_e5m2", "float8_e5m2"),
    ("f8_e4m3fnuz", "float8_e4m3fnuz"),
    ("f8_e5m2fnuz", "float8_e5m2fnuz"),
    ("f8_e8m0", "float8_e8m0fnu"),
    # Two elements a byte, the first in the low nibble: the file's bytes as they are.
    ("f4_e2m1", "float4_e2m1fn_x2"),
):
    if hasattr(torch, _name):
        _DTYPES[("u8", _logical)] = getattr(torch, _name)


def _dtype(storage: str, logical: Optional[str]) -> torch.dtype:
    try:
        return _DTYPES[(storage, logical)]
    except KeyError:
        what = f"{storage} ({logical})" if logical else storage
        raise UnsupportedError(f"type {what} has no torch dtype in torch {torch.__version__}") from None


class _Map:
    """The private copy-on-write map of a file that zero-copy tensors are views of, made once
    per open file, and only when it is the file that was opened (same device, inode, size and
    modification time before and after mapping)."""

    def __init__(self, path: Optional["os.PathLike[str]"], seen: Optional[os.stat_result]) -> None:
        self._path = path
        self._seen = seen
        self._storage: Optional[torch.UntypedStorage] = None
        self._failed = path is None or seen is None

    def storage(self) -> Optional[torch.UntypedStorage]:
        if self._storage is None and not self._failed:
            assert self._path is not None and self._seen is not None
            try:
                storage = torch.UntypedStorage.from_file(os.fspath(self._path), shared=False, nbytes=self._seen.st_size)
                after = os.stat(self._path)
            except (OSError, RuntimeError):
                self._failed = True
                return None
            if _identity(after) != _identity(self._seen):
                self._failed = True
                return None
            self._storage = storage
        return self._storage


def _identity(st: os.stat_result) -> Tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _opened(filename: PathLike, mmap: bool) -> Tuple["_native.File", _Map]:
    """The file opened by the package, and where its zero-copy tensors map it from: the file's
    identity is taken before and after it is opened, so a file replaced meanwhile is read by
    copies only."""
    path = os.fspath(filename)
    try:
        before: Optional[os.stat_result] = os.stat(path)
    except OSError:
        before = None
    file = _native.open(path, mmap)
    mapped = file.mapped_path
    seen: Optional[os.stat_result] = None
    if mapped is not None and before is not None:
        try:
            after = os.stat(path)
        except OSError:
            after = None
        if after is not None and _identity(after) == _identity(before):
            seen = before
    return file, _Map(mapped, seen)


def _tensor(dtype: str, logical: Optional[str], data: "_native.Bytes", shape: Optional[Tuple[int, ...]], mapping: Optional[_Map]) -> torch.Tensor:
    """The tensor of one component: a view of the file's private map for bytes borrowed from
    it (aligned to the element size), else over the decoded bytes (no further copy), else a
    copy of bytes that belong to the file's memory and may not be written (bytes given)."""
    target = _dtype(dtype, logical)
    size = torch.empty((), dtype=target).element_size()
    count = len(data) // size
    numel = 1
    for d in shape or ():
        numel *= d
    if logical == "f4_e2m1" and shape is not None and target.itemsize == 1:
        # torch counts FP4 pairs: the last dimension halves, when each row is whole bytes.
        if (numel + 1) // 2 != count:
            raise UnsupportedError(
                f"an f4_e2m1 tensor of shape {list(shape)} in {count} bytes is not two values a byte "
                "(a zTensor 1.x type of that name holds one): it has no float4_e2m1fn_x2 form"
            )
        if len(shape) == 0 or shape[-1] % 2:
            raise UnsupportedError(
                f"an f4_e2m1 tensor of shape {list(shape)} has no float4_e2m1fn_x2 form (it needs an even last dimension)"
            )
        shape = tuple(shape[:-1]) + (shape[-1] // 2,)
        numel = count
    if shape is None or numel != count:
        # One-dimensional: a component other than dense data, or a logical type whose
        # elements span several stored ones (shaped by storage).
        shape = (count,)
    offset = data.offset
    if data.zero_copy and offset is not None and mapping is not None and offset % size == 0:
        storage = mapping.storage()
        if storage is not None:
            strides = []
            step = 1
            for d in reversed(shape):
                strides.append(step)
                step *= max(d, 1)
            return torch.empty((), dtype=target).set_(storage, offset // size, tuple(shape), tuple(reversed(strides)))
    if count == 0:
        return torch.empty(tuple(shape), dtype=target)
    if data.lend_writable():
        # Decoded bytes that are this tensor's alone: taken writable, without a copy.
        raw = torch.frombuffer(data, dtype=torch.uint8)
    else:
        # The file's own memory, read-only: one copy.
        raw = torch.frombuffer(bytearray(memoryview(data)), dtype=torch.uint8)
    if raw.data_ptr() % size:
        raw = raw.clone()
    return raw.view(target).reshape(shape)


def _value(name: str, format: str, shape: Tuple[int, ...], attributes: Any, parts: Mapping[str, Any], mapping: Optional[_Map]) -> Any:
    """What ``get_tensor`` gives: a tensor for dense data, a sparse tensor for CSR (2-D) and
    COO, the package's :class:`~ztensor_rs.Object` otherwise (quantized groups)."""
    shape = tuple(shape)
    if format == "dense" and "data" in parts:
        dtype, logical, data = parts["data"]
        return _tensor(dtype, logical, data, shape, mapping)
    part = {role: _tensor(d, l, b, None, mapping) for role, (d, l, b) in parts.items()}
    # torch checks the indices (in bounds, ordered) before it keeps them: its kernels trust
    # them, and a file's indices are checked by the package's reader too.
    if format == "sparse_csr" and {"values", "indices", "indptr"} <= part.keys() and len(shape) == 2:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            return torch.sparse_csr_tensor(part["indptr"].long(), part["indices"].long(), part["values"], size=shape, check_invariants=True)
    if format == "sparse_coo" and {"values", "coords"} <= part.keys() and len(shape) > 0:
        coords = part["coords"].long().reshape(len(shape), -1)
        return torch.sparse_coo_tensor(coords, part["values"], size=shape, check_invariants=True)
    return _api._object(name, format, shape, attributes, parts)


def _device(tensor: Any, device: Any) -> Any:
    if str(device) == "cpu" or not isinstance(tensor, torch.Tensor):
        return tensor
    return tensor.to(device)


class safe_open(_api.safe_open):
    """:class:`ztensor_rs.safe_open` giving torch tensors (``framework`` ``"pt"`` or
    ``"torch"``): ``get_tensor`` and ``get_slice(...)[...]`` as ``safetensors.torch`` users
    know them, zero-copy for raw data of a mapped file (see the module's notes), on ``device``.
    """

    def __init__(self, filename: PathLike, framework: str = "pt", device: Any = "cpu", *, mmap: bool = True) -> None:
        if _api._framework(framework) != "pt":
            raise ValueError(f"framework {framework!r}: ztensor_rs.torch.safe_open gives torch tensors ('pt')")
        super().__init__(filename, "pt", device, mmap=mmap)


def _get_tensor(file: "_native.File", name: str, mapping: Optional[_Map], device: Any) -> Any:
    """``safe_open.get_tensor`` for ``framework="pt"``."""
    return _device(_value(*file.object(name), mapping), device)


def _get_slice(file: "_native.File", name: str, mapping: Optional[_Map]) -> "_Slice":
    """``safe_open.get_slice`` for ``framework="pt"``: reads only what the slice needs from a
    mapped raw tensor."""
    tensor = _value(*file.object(name), mapping)
    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided:
        raise UnsupportedError(f"{name!r} is not a dense tensor")
    return _Slice(tensor)


class _Slice:
    """``get_slice``'s answer: ``get_shape()``, ``get_dtype()`` (safetensors' names, as
    ``safetensors.torch`` gives them) and indexing, which copies the selected elements."""

    _NAMES = {
        torch.float64: "F64",
        torch.float32: "F32",
        torch.float16: "F16",
        torch.bfloat16: "BF16",
        torch.int64: "I64",
        torch.int32: "I32",
        torch.int16: "I16",
        torch.int8: "I8",
        torch.uint8: "U8",
        torch.bool: "BOOL",
        torch.complex64: "C64",
    }

    def __init__(self, tensor: torch.Tensor) -> None:
        self._tensor = tensor

    def get_shape(self) -> List[int]:
        return list(self._tensor.shape)

    def get_dtype(self) -> str:
        names = dict(self._NAMES)
        for storage, name in (("uint16", "U16"), ("uint32", "U32"), ("uint64", "U64"), ("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")):
            if hasattr(torch, storage):
                names[getattr(torch, storage)] = name
        return names.get(self._tensor.dtype, str(self._tensor.dtype).removeprefix("torch."))

    def __getitem__(self, key: Any) -> torch.Tensor:
        return self._tensor[key].clone()

    def __len__(self) -> int:
        return len(self._tensor)


def load_file(filename: PathLike, device: Any = "cpu", *, threads: Optional[int] = None, mmap: bool = True) -> Dict[str, Any]:
    """Every tensor of a file, as :func:`safetensors.torch.load_file` gives them: raw data of a
    mapped file without a copy, anything else decoded on ``threads`` threads (default: one per
    core) with the GIL released; on ``device``."""
    file, mapping = _opened(filename, mmap)
    out: Dict[str, Any] = {}
    for described in file.read_all(threads or 0):
        out[described[0]] = _device(_value(*described, mapping), device)
    return out


def load(data: bytes, device: Any = "cpu") -> Dict[str, Any]:
    """Every tensor of a file held in ``data`` (any format the package reads), each tensor's
    bytes copied out of ``data`` once."""
    out: Dict[str, Any] = {}
    for described in _native.open_bytes(data).read_all(0):
        out[described[0]] = _device(_value(*described, None), device)
    return out


def save_file(
    tensors: Mapping[str, torch.Tensor],
    filename: PathLike,
    metadata: Optional[Mapping[Any, Any]] = None,
    *,
    version: Optional[str] = None,
    zstd: Optional[int] = None,
    digest: Optional[str] = None,
    threads: Optional[int] = None,
) -> None:
    """Writes ``tensors`` to ``filename`` as :func:`ztensor_rs.save_file` does (published
    atomically; the format its name says, so ``x.safetensors`` is a safetensors file that
    ``safetensors.torch.load_file`` reads, and ``x.zt`` zTensor 1.2; ``zstd``, ``digest``,
    ``threads``, ``version`` as there; ``metadata`` any attributes for zTensor, safetensors'
    ``Dict[str, str]`` for safetensors). Tensors on any device are saved
    from their CPU values; a view, transposed or sliced tensor saves as its values (its own
    shape, contiguous); tensors sharing storage are saved once each. Refuses (``TypeError``)
    anything that is not a tensor, and (:class:`~ztensor_rs.UnsupportedError`) a dtype zTensor
    has no type for (``complex32``, ``quint8``...)."""
    _api.save_file(_checked(tensors), filename, metadata, version=version, zstd=zstd, digest=digest, threads=threads)


def save(
    tensors: Mapping[str, torch.Tensor],
    metadata: Optional[Mapping[Any, Any]] = None,
    *,
    version: Optional[str] = None,
    zstd: Optional[int] = None,
    digest: Optional[str] = None,
    threads: Optional[int] = None,
) -> bytes:
    """As :func:`save_file`, returning the file's bytes."""
    return _api.save(_checked(tensors), metadata, version=version, zstd=zstd, digest=digest, threads=threads)


def _checked(tensors: Mapping[str, torch.Tensor]) -> Mapping[str, torch.Tensor]:
    if not isinstance(tensors, Mapping):
        raise TypeError("tensors: a mapping of names to torch tensors")
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"tensor {name!r}: a torch.Tensor, not {type(tensor).__name__}")
        if tensor.layout != torch.strided:
            raise UnsupportedError(f"tensor {name!r}: {tensor.layout} tensors are saved dense; call .to_dense() first")
        if tensor.dtype not in _SAVED:
            raise UnsupportedError(f"tensor {name!r}: torch dtype {tensor.dtype} has no zTensor type")
    return tensors


_SAVED = set(_DTYPES.values())
