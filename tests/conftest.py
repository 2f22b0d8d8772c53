"""Shared test fixtures, and the `slow` marker of the tests listed in tests/slow_tests.txt
(`pytest -m "not slow"`: the fast subset, README "Tests")."""

import logging
from pathlib import Path

import pytest

from _data_util import copy_db, demo_text_lines, populate


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


@pytest.fixture()
def no_user_config(tmp_path, monkeypatch):
    """Defaults (no config file of the machine running the tests), except that the model starts
    empty: tests that use this count what commands do to a household's own labels."""
    cfg = tmp_path / "empty.toml"
    cfg.write_text('[model]\nstart = "empty"\n')
    monkeypatch.setenv("EDGE_PLM_CONFIG", str(cfg))


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    """The demo session's transcripts replayed once through the real loop (48 interactions,
    several model versions); one per test module, shared by its read-only tests."""
    d = tmp_path_factory.mktemp("state") / "state"
    summary = populate(d / "edge-plm.db", demo_text_lines())
    assert summary["interactions"] == 48
    return d


@pytest.fixture()
def db(demo_dir, tmp_path):
    """A private copy of the demo database for tests that change the data."""
    return copy_db(demo_dir, tmp_path / "state")


SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def _slow_ids() -> set[str]:
    return {line.strip() for line in SLOW_LIST.read_text().splitlines()
            if line.strip() and not line.startswith("#")}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    """Mark the tests of tests/slow_tests.txt `slow`. When the whole suite is collected, an id
    there that names no test is an error (a renamed or removed test must leave the list)."""
    slow = _slow_ids()
    seen = set()
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
            seen.add(item.nodeid)
    whole = not config.args or [Path(a).resolve() for a in config.args] == [Path(__file__).parent.resolve()]
    if whole and not config.option.keyword and slow - seen:
        raise pytest.UsageError(f"{SLOW_LIST.name} names tests that do not exist: {', '.join(sorted(slow - seen))}")
