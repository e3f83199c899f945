"""The exceptions ztensor_rs raises.

Every error about a file or about what is written is a :class:`ZTensorError`; I/O failures are
the built-in :class:`OSError` subclasses (``FileNotFoundError``, ``PermissionError``, ...).
"""

from __future__ import annotations

from typing import Optional


class ZTensorError(Exception):
    """An error of ztensor_rs.

    Attributes:
        rule: the identifier of the rule broken (``spec/rules.md`` of the project, e.g.
            ``"digest_mismatch"``; ``"tb_…"`` for TensorBuffers), or ``None``.
        object: the object (tensor) concerned, or ``None``.
        offset: the byte offset in the file where the fault lies, or ``None``.
        filename: the file concerned, as given (its message then starts with it), or ``None``
            for bytes given to :func:`load` / :func:`open_bytes`.
    """

    rule: Optional[str] = None
    object: Optional[str] = None
    offset: Optional[int] = None
    filename: Optional[str] = None


class FormatError(ZTensorError, ValueError):
    """A file breaks a rule of its format, or what is being written breaks one (a shape that
    does not match the data, a type the chosen version cannot hold)."""


class UnsupportedError(ZTensorError):
    """A valid object this package cannot decode (an unknown encoding, dtype or layout)."""


class ObjectNotFoundError(ZTensorError, KeyError):
    """No object (tensor) of that name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""
