"""Shared helpers: the repository's fixtures and their index."""

from __future__ import annotations

import pathlib
import tomllib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
FIXTURES = REPO / "fixtures"


def index() -> list[dict]:
    """Every fixture: the generated corpus and the frozen files of other producers."""
    with open(FIXTURES / "index.toml", "rb") as f:
        entries = tomllib.load(f)["fixture"]
    with open(FIXTURES / "producers" / "index.toml", "rb") as f:
        return entries + tomllib.load(f)["fixture"]


@pytest.fixture
def tmp(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path
