"""Shared test fixtures."""

import logging

import pytest


@pytest.fixture(autouse=True)
def _restore_logging():
    """CLI commands configure logging as a program should (root handlers and level, the
    ``edge_plm`` logger's level for quiet --json output); tests call them in-process, so put
    logging back after each test — otherwise a later test's ``caplog`` misses records below
    the level an earlier command set."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    ours = {name: lg.level for name, lg in logging.root.manager.loggerDict.items()
            if isinstance(lg, logging.Logger) and name.split(".")[0] == "edge_plm"}
    ours.setdefault("edge_plm", logging.getLogger("edge_plm").level)
    yield
    root.setLevel(level)
    root.handlers[:] = handlers
    for name, lg in logging.root.manager.loggerDict.items():
        if isinstance(lg, logging.Logger) and name.split(".")[0] == "edge_plm":
            lg.setLevel(ours.get(name, logging.NOTSET))
