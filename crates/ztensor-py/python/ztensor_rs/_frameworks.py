"""Where values for a framework other than NumPy come from.

``safe_open``, ``load_file`` and ``load`` give NumPy arrays themselves; for ``framework="pt"``
they hand the opened file to the PyTorch adapter, ``ztensor_rs.torch``, imported on first use
(so that NumPy users never import torch). An adapter module provides:

- ``_opened(filename, mmap) -> (file, mapping)``: the file opened for tensors that may borrow
  from a memory map (``mapping``, or ``None``);
- ``_get_tensor(file, name, mapping, device)`` and ``_get_slice(file, name, mapping)``;
- ``_value(name, format, shape, attributes, parts, mapping)``: one object as a value;
- ``load_file(filename, *, threads, mmap)``: every tensor of a file.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# Each framework's adapter module, relative to this package.
_ADAPTERS = {"pt": ".torch"}


def adapter(framework: str) -> ModuleType:
    """The adapter module of ``framework`` (one of those ``_api._framework`` accepts besides
    ``"numpy"``), imported on first use."""
    return importlib.import_module(_ADAPTERS[framework], __package__)
