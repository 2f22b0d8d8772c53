"""Shared test fixtures."""

import logging

import pytest


@pytest.fixture(autouse=True)
def _restore_root_logging():
    """CLI commands configure the root logger (level, handlers) as a program should; tests call
    them in-process, so put the root logger back after each test — otherwise a later test's
    ``caplog`` misses records below the level an earlier command set."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    root.setLevel(level)
    root.handlers[:] = handlers
