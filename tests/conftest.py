"""Shared fixtures: one synthesis cache per test session (per xdist worker)."""

import pytest


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("build")
