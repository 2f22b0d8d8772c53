"""`edge-plm --version` prints the package's version (the one pyproject.toml declares)."""

import tomllib
from pathlib import Path

from typer.testing import CliRunner

from edge_plm.cli import app

ROOT = Path(__file__).resolve().parents[2]


def test_version_matches_the_project_metadata():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"edge-plm {declared}"
