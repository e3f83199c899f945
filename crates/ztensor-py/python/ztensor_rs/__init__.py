"""Read and write zTensor files of every version (0.1, 1.1, 1.2); read safetensors, TensorBuffers,
NumPy .npy/.npz, GGUF files and PyTorch checkpoints too.

The API follows the ``safetensors`` package::

    import numpy as np
    import ztensor_rs

    ztensor_rs.save_file({"w": np.ones((2, 3), np.float32)}, "model.zt", zstd=3)
    with ztensor_rs.safe_open("model.zt", framework="numpy") as f:
        for name in f.keys():
            print(name, f.get_tensor(name).shape)
    tensors = ztensor_rs.load_file("model.zt", threads=8)

Arrays of raw little-endian tensors in a memory-mapped file borrow the map (no copy); every
array this package returns is read-only (``.copy()`` gives a writable one). Digests are checked
whenever data is read. bfloat16 and FP8 use ``ml_dtypes`` when it is installed (raw ``uint16``
/ ``uint8`` otherwise, with the logical type in :meth:`safe_open.get_object`); sparse objects
become ``scipy.sparse`` arrays when scipy is installed.
"""

from ._api import (
    Component,
    Object,
    SparseCOO,
    SparseCSR,
    TensorSlice,
    content_id,
    convert,
    detect,
    load,
    load_file,
    open_bytes,
    safe_open,
    save,
    save_file,
)
from ._errors import FormatError, ObjectNotFoundError, UnsupportedError, ZTensorError
from ._native import __version__
from ._plans import finalize, plan_units, run_unit

__all__ = [
    "detect",
    "convert",
    "content_id",
    "safe_open",
    "load_file",
    "save_file",
    "load",
    "save",
    "open_bytes",
    "plan_units",
    "run_unit",
    "finalize",
    "Object",
    "Component",
    "SparseCSR",
    "SparseCOO",
    "TensorSlice",
    "ZTensorError",
    "FormatError",
    "UnsupportedError",
    "ObjectNotFoundError",
]
