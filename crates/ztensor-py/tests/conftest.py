"""Shared helpers: the repository's fixtures and their index."""

from __future__ import annotations

import pathlib
import tomllib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
FIXTURES = REPO / "fixtures"


def index() -> list[dict]:
    with open(FIXTURES / "index.toml", "rb") as f:
        return tomllib.load(f)["fixture"]


@pytest.fixture
def tmp(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path
