"""The implementation of the ``ztensor_rs`` package, whose ``__init__`` re-exports the public
names (its ``__all__``): the helpers and imports here stay out of the package's namespace."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _frameworks, _native
from ._errors import FormatError, ObjectNotFoundError, UnsupportedError, ZTensorError

PathLike = Union[str, "os.PathLike[str]"]

_STORAGE = {
    "f64": "<f8",
    "f32": "<f4",
    "f16": "<f2",
    "bf16": "<u2",
    "i64": "<i8",
    "i32": "<i4",
    "i16": "<i2",
    "i8": "i1",
    "u64": "<u8",
    "u32": "<u4",
    "u16": "<u2",
    "u8": "u1",
    "bool": "?",
}

_ML_DTYPES_NAMES = {
    "bf16": "bfloat16",
    "f8_e4m3fn": "float8_e4m3fn",
    "f8_e5m2": "float8_e5m2",
    "f8_e4m3fnuz": "float8_e4m3fnuz",
    "f8_e5m2fnuz": "float8_e5m2fnuz",
    "f8_e8m0": "float8_e8m0fnu",
}

# The packed microscaling types (the bits an element: element i is bits b*i..b*(i+1) of the
# little-endian bit stream, so FP4's first element is the low nibble) and the ml_dtypes type
# that holds one element a byte, in its low bits.
_PACKED = {
    "f4_e2m1": (4, "float4_e2m1fn"),
    "f6_e2m3": (6, "float6_e2m3fn"),
    "f6_e3m2": (6, "float6_e3m2fn"),
}


def _unpacked(bits: int, data: Any, count: int) -> np.ndarray:
    """``count`` elements of ``bits`` bits each, one a byte, from the packed bytes ``data``."""
    packed = np.frombuffer(data, dtype=np.uint8)
    if packed.size * 8 < count * bits:
        raise FormatError(f"{packed.size} bytes hold fewer than {count} elements of {bits} bits")
    stream = np.unpackbits(packed, bitorder="little")[: count * bits].reshape(count, bits)
    return np.packbits(stream, axis=1, bitorder="little").reshape(count)


def _packed(bits: int, codes: np.ndarray) -> np.ndarray:
    """The elements ``codes`` (one a byte, in its low ``bits`` bits) packed as ``_unpacked``
    reads them, the bits past the last element zero."""
    flat = np.ascontiguousarray(codes.reshape(-1)).view(np.uint8)
    stream = np.unpackbits(flat.reshape(-1, 1), axis=1, bitorder="little")[:, :bits]
    return np.packbits(stream.reshape(-1), bitorder="little")


def _ml_dtypes() -> Any:
    try:
        import ml_dtypes  # type: ignore[import-not-found]
    except ImportError:
        return None
    return ml_dtypes


def _np_dtype(dtype: str, logical: Optional[str]) -> np.dtype:
    """The NumPy dtype for a storage type and logical type."""
    if logical == "complex64":
        return np.dtype("<c8")
    if logical == "complex128":
        return np.dtype("<c16")
    special = _ML_DTYPES_NAMES.get(logical) if logical else None
    if special is None and dtype == "bf16":
        special = "bfloat16"
    if special is not None:
        ml = _ml_dtypes()
        if ml is not None and hasattr(ml, special):
            return np.dtype(getattr(ml, special))
    try:
        return np.dtype(_STORAGE[dtype])
    except KeyError:
        raise UnsupportedError(f"storage type {dtype!r} has no NumPy dtype") from None


def _array(dtype: str, logical: Optional[str], data: Any, shape: Tuple[int, ...]) -> np.ndarray:
    """A read-only array over ``data`` (no copy), shaped ``shape`` when the element count
    fits, else one-dimensional. Packed microscaling elements (FP4, FP6) are unpacked, one a
    byte, into ml_dtypes' type when it is installed (a copy); else their bytes, one-dimensional."""
    if logical in _PACKED and dtype == "u8":
        bits, name = _PACKED[logical]
        ml = _ml_dtypes()
        count = math.prod(shape)
        if ml is not None and hasattr(ml, name) and count * bits <= len(data) * 8 < count * bits + 8:
            return _unpacked(bits, data, count).view(getattr(ml, name)).reshape(shape)
        return np.frombuffer(data, dtype=np.uint8)
    target = _np_dtype(dtype, logical)
    array = np.frombuffer(data, dtype=target)
    try:
        if math.prod(shape) == array.size:
            return array.reshape(shape)
        if target != np.dtype(_STORAGE.get(dtype, target)):
            # A logical type whose elements span several storage elements, shaped by storage.
            storage = np.frombuffer(data, dtype=_STORAGE[dtype])
            if math.prod(shape) == storage.size:
                return storage.reshape(shape)
    except ValueError as e:
        # A shape NumPy cannot hold (a dimension past its index range, say, with no element
        # at all): the file's fault, said in this package's terms.
        raise UnsupportedError(f"shape {list(shape)}: NumPy cannot hold it ({e})") from None
    return array


@dataclass(frozen=True)
class Component:
    """One component of an object: its storage type, logical type, and decoded data.

    A component is a DLPack producer: ``torch.from_dlpack(c)``, ``np.from_dlpack(c)`` and
    ``jax.dlpack.from_dlpack(c)`` take its bytes without a copy, with the element type it has
    in the file, bfloat16, FP8 and E8M0 included (which NumPy's own DLPack export refuses),
    and packed FP4 as DLPack's FLOAT4_E2M1FN of two lanes, a byte each (what torch's
    ``float4_e2m1fn_x2`` is; an odd last dimension has no such form and raises). Bytes
    borrowed from the file's map are exported read-only (a DLPack 1.0 flag: NumPy honours it,
    torch ignores it, and writing into such a tensor then faults, as the map is read-only);
    ask with ``copy=True`` for a private, writable copy. A consumer asking for DLPack before
    1.0, which cannot say read-only (JAX does), gets such a copy of mapped bytes. Decoded bytes
    are exported writable, and the component's ``array`` sees what a consumer writes."""

    role: str
    dtype: str
    type: Optional[str]
    array: np.ndarray
    zero_copy: bool = False
    _bytes: Any = field(default=None, repr=False, compare=False)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any:
        if self._bytes is None:
            raise BufferError(f"component {self.role!r} was made by hand; it has no bytes to export")
        return self._bytes.dlpack(
            self.dtype,
            self.type,
            list(self.array.shape),
            stream=stream,
            max_version=max_version,
            dl_device=dl_device,
            copy=copy,
        )

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (1, 0)


@dataclass(frozen=True)
class Object:
    """An object of any format (dense, sparse_csr, sparse_coo, quantized_group, or one this
    package does not know), with its attributes and decoded components."""

    name: str
    format: str
    shape: Tuple[int, ...]
    attributes: Optional[Dict[Any, Any]]
    components: Dict[str, Component] = field(default_factory=dict)

    def _dense(self) -> Component:
        if self.format != "dense" or "data" not in self.components:
            raise BufferError(
                f"{self.name!r} is {self.format}, not one dense array: export its components "
                f"({', '.join(self.components)}) one by one"
            )
        return self.components["data"]

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any:
        """A dense object's data as a DLPack capsule (see :class:`Component`)."""
        return self._dense().__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self._dense().__dlpack_device__()


@dataclass(frozen=True)
class SparseCSR:
    """A CSR matrix as arrays, when scipy is not installed (``to_scipy()`` converts)."""

    shape: Tuple[int, ...]
    values: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray

    def to_scipy(self) -> Any:
        import scipy.sparse  # type: ignore[import-not-found]

        return scipy.sparse.csr_array((self.values, self.indices, self.indptr), shape=self.shape)


@dataclass(frozen=True)
class SparseCOO:
    """A COO tensor as arrays (``coords`` has one row per dimension), when scipy is not
    installed or cannot hold it (``to_scipy()`` converts)."""

    shape: Tuple[int, ...]
    values: np.ndarray
    coords: np.ndarray

    def to_scipy(self) -> Any:
        import scipy.sparse  # type: ignore[import-not-found]

        return scipy.sparse.coo_array((self.values, tuple(self.coords)), shape=self.shape)


def _object(name: str, format: str, shape: Tuple[int, ...], attributes: Any, parts: Mapping[str, Any]) -> Object:
    components = {}
    for role, (dtype, logical, data) in parts.items():
        if format == "dense" and role == "data":
            array = _array(dtype, logical, data, shape)
        elif format == "sparse_coo" and role == "coords" and len(shape) > 0:
            flat = _array(dtype, logical, data, (-1,))
            array = flat.reshape(len(shape), -1) if flat.size % len(shape) == 0 else flat
        else:
            array = _array(dtype, logical, data, (-1,))
        # (Packed FP4/FP6 unpacked into ml_dtypes' types is a copy, not a view of the bytes.)
        unpacked = logical in _PACKED and array.dtype != np.uint8
        components[role] = Component(role, dtype, logical, array, bool(data.zero_copy) and not unpacked, data)
    return Object(name, format, tuple(shape), attributes, components)


def _value(obj: Object, framework: str) -> Any:
    """What ``get_tensor`` gives for an object: the array of a dense tensor, a sparse array
    for CSR/COO, the object itself otherwise."""
    c = obj.components
    if obj.format == "dense" and "data" in c:
        return c["data"].array
    if obj.format == "sparse_csr" and {"values", "indices", "indptr"} <= c.keys():
        record = SparseCSR(obj.shape, c["values"].array, c["indices"].array, c["indptr"].array)
        if len(obj.shape) == 2:
            try:
                return record.to_scipy()
            except ImportError:
                pass
        return record
    if obj.format == "sparse_coo" and {"values", "coords"} <= c.keys():
        coo = SparseCOO(obj.shape, c["values"].array, c["coords"].array)
        try:
            return coo.to_scipy()
        except (ImportError, ValueError, TypeError):
            return coo
    return obj


_FRAMEWORKS = {"numpy": "numpy", "np": "numpy", "pt": "pt", "torch": "pt", "pytorch": "pt"}


def _framework(framework: str) -> str:
    try:
        return _FRAMEWORKS[framework]
    except KeyError:
        raise ValueError(f"framework {framework!r}: 'numpy' or 'pt'") from None


class TensorSlice:
    """A lazily sliced tensor, as ``safetensors``' ``get_slice`` gives: ``get_shape()``,
    ``get_dtype()`` and indexing (``f.get_slice("w")[0:2, :]``). Slicing a mapped raw tensor
    reads only the pages it needs."""

    def __init__(self, array: np.ndarray, dtype: str, framework: str) -> None:
        self._array = array
        self._dtype = dtype
        self._framework = framework

    def get_shape(self) -> List[int]:
        return list(self._array.shape)

    def get_dtype(self) -> str:
        return self._dtype

    def __getitem__(self, key: Any) -> Any:
        return np.array(self._array[key])

    def __len__(self) -> int:
        return len(self._array)


class safe_open:
    """An open file of tensors: any zTensor version, safetensors (a file, or a sharded
    checkpoint's ``*.index.json``), TensorBuffers, NumPy ``.npy``/``.npz`` , GGUF (quantized
    GGUF tensors as their block bytes, with ``gguf.type`` and ``gguf.shape`` attributes) or a
    PyTorch checkpoint (``torch.save``; its pickle is never run, its plain values are the
    metadata). Use it as a context manager.

    Args:
        filename: the file.
        framework: ``"numpy"`` (read-only arrays, zero-copy where possible) or ``"pt"``
            (``"torch"``; PyTorch tensors, zero-copy for raw data of a mapped file, as
            :mod:`ztensor_rs.torch` gives them).
        device: ``"cpu"``; with ``"pt"``, any torch device the tensors are moved to.
        mmap: read through a read-only memory map (the default). The file must then not be
            truncated or changed in place while it or arrays from it are in use (files this
            package writes are replaced by rename, never changed in place); ``mmap=False``
            reads with positional reads instead and copies every tensor.
    """

    def __init__(self, filename: PathLike, framework: str = "numpy", device: Any = "cpu", *, mmap: bool = True) -> None:
        self._framework = _framework(framework)
        self._device = device
        self._map: Any = None
        if self._framework == "pt":
            self._file, self._map = _frameworks.adapter("pt")._opened(filename, mmap)
            return
        if device != "cpu":
            raise ValueError(f"device {device!r}: NumPy arrays are on the CPU ('cpu'); framework='pt' gives tensors on any device")
        self._file: Optional[_native.File] = _native.open(os.fspath(filename), mmap)

    @classmethod
    def _of(cls, file: "_native.File", framework: str) -> "safe_open":
        self = cls.__new__(cls)
        self._framework = _framework(framework)
        self._file = file
        self._device = "cpu"
        self._map = None
        return self

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the file; arrays already returned stay valid."""
        self._file = None

    @property
    def _f(self) -> "_native.File":
        if self._file is None:
            raise ValueError("the file is closed")
        return self._file

    @property
    def format(self) -> str:
        """What the file is: ``"zTensor 1.2"``, ``"safetensors"``, …"""
        return self._f.format

    def keys(self) -> List[str]:
        """The object names, sorted."""
        return sorted(set(self._f.names()))

    def metadata(self) -> Optional[Dict[Any, Any]]:
        """The file attributes (safetensors ``__metadata__``) as Python data, or ``None``."""
        return self._f.attributes()

    def info(self, name: str) -> Dict[str, Any]:
        """Object ``name`` described without reading its data: format, shape, attributes,
        and per component the storage type, logical type, encoding, lengths and digest."""
        return self._f.info(name)

    def get_object(self, name: str) -> Object:
        """Object ``name`` with every component decoded and checked."""
        return _object(*self._f.object(name))

    def get_tensor(self, name: str) -> Any:
        """Tensor ``name``: an array for dense tensors, a ``scipy.sparse`` array (or
        :class:`SparseCSR` / :class:`SparseCOO`) for sparse ones, an :class:`Object` for
        anything else."""
        if self._framework == "pt":
            return _frameworks.adapter("pt")._get_tensor(self._f, name, self._map, self._device)
        name, format, shape, attributes, parts = self._f.object(name)
        if format == "dense" and len(parts) == 1 and "data" in parts:
            dtype, logical, data = parts["data"]
            return _array(dtype, logical, data, shape)
        return _value(_object(name, format, shape, attributes, parts), self._framework)

    def get_slice(self, name: str) -> TensorSlice:
        """A dense tensor to slice without reading all of it."""
        if self._framework == "pt":
            return _frameworks.adapter("pt")._get_slice(self._f, name, self._map)
        obj = self.get_object(name)
        if obj.format != "dense" or "data" not in obj.components:
            raise UnsupportedError(f"{name!r} is {obj.format}, not a dense tensor")
        return TensorSlice(obj.components["data"].array, obj.components["data"].dtype, self._framework)


def _load(file: "_native.File", threads: Optional[int], framework: str) -> Dict[str, Any]:
    framework = _framework(framework)
    if framework == "pt":
        pt = _frameworks.adapter("pt")
        return {d[0]: pt._value(*d, None) for d in file.read_all(threads or 0)}
    out: Dict[str, Any] = {}
    for name, format, shape, attributes, parts in file.read_all(threads or 0):
        out[name] = _value(_object(name, format, shape, attributes, parts), framework)
    return out


def load_file(filename: PathLike, *, threads: Optional[int] = None, framework: str = "numpy", mmap: bool = True) -> Dict[str, Any]:
    """Every tensor of a file, read on ``threads`` threads (default: one per core) with the GIL
    released. Values as :meth:`safe_open.get_tensor` gives them."""
    if _framework(framework) == "pt":
        return _frameworks.adapter("pt").load_file(filename, threads=threads, mmap=mmap)
    return _load(_native.open(os.fspath(filename), mmap), threads, framework)


def detect(filename: PathLike) -> str:
    """What the file is, by its content, as the ``ztensor`` tool tells it: ``ztensor``,
    ``ztensor2``, ``safetensors``, ``safetensors-sharded``, ``ztensor-sharded``,
    ``tensorbuffers``, ``npy``, ``npz``, ``gguf``, ``pytorch`` or ``pytorch-dcp`` (a Distributed Checkpoint's directory). Raises :class:`FormatError` for a file of a format not
    read (naming it when known) and ``OSError`` when it cannot be read."""
    return _native.detect(os.fspath(filename))


def convert(
    src: PathLike,
    dst: PathLike,
    *,
    to: Optional[str] = None,
    zstd: Optional[int] = None,
    drop_attributes: bool = False,
    threads: Optional[int] = None,
) -> int:
    """Converts ``src`` (any format :func:`detect` names) to ``dst``, published atomically, and
    returns how many objects were written: the command-line tool's conversion (``ztensor
    convert``), byte for byte, held to the same rules (the same request raises ``ValueError``
    where the tool refuses it with status 2). Without ``to``, what is written is what ``dst``'s
    extension names, as for the tool: ``.zt`` zTensor 1.2, ``.safetensors``, ``.tb``
    TensorBuffers; any other name raises ``ValueError``. ``to`` names the target as ``--to``
    does, and may not contradict the name (``"2"`` for ``x.safetensors`` raises): ``"2"`` (zTensor 2,
    canonical form: the same tensors give the same bytes; with ``zstd``, every part stored under
    ``zt.zstd-seekable/1`` instead), ``"0.1"``, ``"1.1"``, ``"1.2"`` or ``"zt"`` (with ``zstd``,
    each tensor zstd-compressed), ``"safetensors"`` or ``"tensorbuffers"`` (raw bytes: ``zstd``
    raises ``ValueError``). A zTensor file converted to ``"2"`` and back has the same content
    and the same :func:`content_id`. Content the target cannot hold raises
    :class:`ZTensorError` (attributes, unless ``drop_attributes``). ``threads`` compression
    threads (default: one per core), whatever the target. ``src`` may be an object URL
    (``s3://``, ``gs://``, ``az://``, ``http(s)://``), read by ranges; ``dst`` an object URL
    (``s3://``, ``gs://``, ``az://``), uploaded as it is written (zTensor 2 through an unnamed
    temporary file first) and published whole, or not at all on an error. ``dst`` may not be
    ``src`` (a hard link to it included) or a file ``src``'s content lies in (a shard), except
    a zTensor file rewritten as zTensor 0.1/1.x in place; a directory (a sharded checkpoint) is
    written by ``ztensor convert``."""
    return _native.convert(os.fspath(src), os.fspath(dst), to, zstd, drop_attributes, threads or 0)


def content_id(filename: PathLike, algorithm: str = "sha256") -> str:
    """The content identity of a file of any format :func:`detect` names: the zTensor 2
    content digest (``"sha256:…"`` or, with ``algorithm="xxh3"``, ``"xxh3:…"``) of its objects
    (names, shapes, layouts, types, attributes and each part's bytes), whatever their placement,
    compression or container. A zTensor 1.x file and its zTensor 2 conversion have the same one,
    and it is what ``ztensor id`` prints."""
    return _native.content_id(os.fspath(filename), algorithm)


def load(data: bytes, *, framework: str = "numpy") -> Dict[str, Any]:
    """Every tensor of a file held in ``data`` (any format this package reads)."""
    return _load(_native.open_bytes(data), None, framework)


def open_bytes(data: bytes, framework: str = "numpy") -> safe_open:
    """A :class:`safe_open` over a file held in ``data``."""
    return safe_open._of(_native.open_bytes(data), framework)


_FROM_NUMPY = {
    ("f", 8): ("f64", None),
    ("f", 4): ("f32", None),
    ("f", 2): ("f16", None),
    ("i", 8): ("i64", None),
    ("i", 4): ("i32", None),
    ("i", 2): ("i16", None),
    ("i", 1): ("i8", None),
    ("u", 8): ("u64", None),
    ("u", 4): ("u32", None),
    ("u", 2): ("u16", None),
    ("u", 1): ("u8", None),
    ("b", 1): ("bool", None),
    ("c", 8): ("f32", "complex64"),
    ("c", 16): ("f64", "complex128"),
}

_FROM_ML_DTYPES = {
    "bfloat16": ("bf16", None),
    "float8_e8m0fnu": ("u8", "f8_e8m0"),
    "float4_e2m1fn": ("u8", "f4_e2m1"),
    "float6_e2m3fn": ("u8", "f6_e2m3"),
    "float6_e3m2fn": ("u8", "f6_e3m2"),
    "float8_e4m3fn": ("u8", "f8_e4m3fn"),
    "float8_e5m2": ("u8", "f8_e5m2"),
    "float8_e4m3fnuz": ("u8", "f8_e4m3fnuz"),
    "float8_e5m2fnuz": ("u8", "f8_e5m2fnuz"),
}

_FROM_TORCH = {
    "bfloat16": ("bf16", None, "int16"),
    "float8_e4m3fn": ("u8", "f8_e4m3fn", "uint8"),
    "float8_e5m2": ("u8", "f8_e5m2", "uint8"),
    "float8_e4m3fnuz": ("u8", "f8_e4m3fnuz", "uint8"),
    "float8_e5m2fnuz": ("u8", "f8_e5m2fnuz", "uint8"),
    "float8_e8m0fnu": ("u8", "f8_e8m0", "uint8"),
    # Two FP4 elements a byte, the first in the low nibble (as zTensor 2 and safetensors hold
    # them); torch's shape counts bytes, the file's elements.
    "float4_e2m1fn_x2": ("u8", "f4_e2m1", "uint8"),
}


def _item(name: str, value: Any) -> Tuple[str, str, Optional[str], List[int], memoryview]:
    if not isinstance(name, str):
        raise TypeError(f"tensor names are str, not {type(name).__name__}")
    special: Optional[Tuple[str, Optional[str]]] = None
    shape: Optional[List[int]] = None
    if hasattr(value, "detach") and hasattr(value, "cpu") and hasattr(value, "numpy"):
        # A PyTorch tensor: its bytes, through a same-width integer view where NumPy has no
        # dtype for it.
        tensor = value.detach().cpu().contiguous()
        torch_name = str(tensor.dtype).removeprefix("torch.")
        if torch_name in _FROM_TORCH:
            dtype, logical, view = _FROM_TORCH[torch_name]
            import torch  # type: ignore[import-not-found]

            if logical == "f4_e2m1":
                if tensor.dim() == 0:
                    raise FormatError(f"tensor {name!r}: a float4_e2m1fn_x2 tensor of no dimensions has no element count")
                shape = [int(d) for d in tensor.shape[:-1]] + [2 * int(tensor.shape[-1])]
            tensor = tensor.view(getattr(torch, view))
            special = (dtype, logical)
        value = tensor.numpy()
    array = np.asarray(value)
    if special is None and array.dtype.name in _FROM_ML_DTYPES:
        special = _FROM_ML_DTYPES[array.dtype.name]
        if special[1] in _PACKED:
            # One element a byte in ml_dtypes: packed as the file holds them.
            shape = [int(d) for d in array.shape]
            array = _packed(_PACKED[special[1]][0], np.asarray(array, order="C"))
    if special is None:
        key = (array.dtype.kind, array.dtype.itemsize)
        if key not in _FROM_NUMPY:
            raise FormatError(f"tensor {name!r}: NumPy dtype {array.dtype} has no zTensor type")
        special = _FROM_NUMPY[key]
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
    dtype, logical = special
    array = np.asarray(array, order="C")  # keeps 0-d arrays 0-d, unlike ascontiguousarray
    data = memoryview(array.reshape(-1).view(np.uint8))
    return (name, dtype, logical, shape if shape is not None else [int(d) for d in array.shape], data)


def _items(tensors: Mapping[str, Any]) -> List[Tuple[str, str, Optional[str], List[int], memoryview]]:
    if not isinstance(tensors, Mapping):
        raise TypeError("tensors: a mapping of names to arrays")
    return [_item(name, value) for name, value in tensors.items()]


def save_file(
    tensors: Mapping[str, Any],
    filename: PathLike,
    metadata: Optional[Mapping[Any, Any]] = None,
    *,
    version: Optional[str] = None,
    zstd: Optional[int] = None,
    digest: Optional[str] = None,
    threads: Optional[int] = None,
) -> None:
    """Writes dense tensors (NumPy arrays, PyTorch tensors, or anything ``numpy.asarray``
    takes) to ``filename``, published atomically (the old file, if any, is replaced only when
    the new one is complete), in the format its name says, as ``ztensor convert`` picks it:
    ``.safetensors`` a safetensors file (which ``safetensors`` itself reads), ``.tb``
    TensorBuffers, ``.zt`` or a name of no format zTensor 1.2. ``version`` asks for one
    (``"0.1"``, ``"1.1"``, ``"1.2"``, ``"2"``, ``"safetensors"``, ``"tensorbuffers"``); one the
    name contradicts (``"2"`` for ``x.safetensors``), or a name of a format read but not written
    (``.pt``, ``.bin``, ``.npz``), raises ``ValueError``. ``filename`` may be an object URL
    (``s3://``, ``gs://``, ``az://``): the file goes up as a multipart upload while it is
    written and the object appears only when it is complete (an error aborts the upload),
    configured from the environment as reads are.

    Args:
        metadata: file attributes (str, int, float, bool, None, bytes, lists, dicts; a
            safetensors file holds text values only).
        zstd: compress every tensor with zstd at this level (1-22); raw when ``None``. zTensor
            only (``ValueError`` for safetensors and TensorBuffers, which store raw bytes).
        digest: ``"crc32c"``, ``"sha256"`` or ``"blake3"`` per tensor, or ``None``. zTensor
            1.x only.
        threads: compression and digest threads (default: one per core). The file's bytes do
            not depend on it.
    """
    _native.save(_items(tensors), os.fspath(filename), metadata, version, zstd, digest, threads or 0)


def save(
    tensors: Mapping[str, Any],
    metadata: Optional[Mapping[Any, Any]] = None,
    *,
    version: Optional[str] = None,
    zstd: Optional[int] = None,
    digest: Optional[str] = None,
    threads: Optional[int] = None,
) -> bytes:
    """As :func:`save_file`, returning the file's bytes (zTensor 1.2 unless ``version`` asks
    for another format)."""
    out = _native.save(_items(tensors), None, metadata, version, zstd, digest, threads or 0)
    assert out is not None
    return out
