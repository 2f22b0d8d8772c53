"""Every command's `--help` works, and a usage error is one ``error: ...`` line (exit 2)."""

from __future__ import annotations

import pytest
import typer.main
from typer.testing import CliRunner

from edge_plm.cli import app

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("no_user_config")


def _command_paths(command, path=()):
    yield list(path)
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _command_paths(sub, (*path, name))


PATHS = list(_command_paths(typer.main.get_command(app)))


def test_every_command_is_walked():
    names = {" ".join(p) for p in PATHS}
    assert {"", "eval", "label", "forget", "model import", "train lm", "asr transcribe",
            "db backup", "config check"} <= names
    assert len(PATHS) >= 30


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "edge-plm")
def test_help_exits_zero(path):
    res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    assert "Usage:" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("args,needle", [
    (["log", "--label", "MAYBE"], "--label"),
    (["label", "1", "MAYBE"], "ACTION"),
    (["export", "--format", "xml"], "--format"),
    (["eval", "--train", "a", "--test", "b", "--model-config", "banana"], "--model-config"),
    (["train", "lm", "--corpus", "c", "--model-config", "potato"], "--model-config"),
    (["asr", "transcribe", "x.wav", "--backend", "siri"], "--backend"),
    (["log", "--no-such-option"], "--no-such-option"),
    (["no-such-command"], "no-such-command"),
])
def test_usage_errors_are_one_line(args, needle):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], res.stderr


def test_choices_accept_any_case(tmp_path):
    """`--label off`, `--format CSV` and `label ID noop` were accepted before the choices were
    enums; they still are (the usage error would be exit 2 before the database is opened)."""
    missing = tmp_path / "missing.db"
    for args in (["log", "--label", "off"], ["log", "--label", "None"],
                 ["export", "--format", "CSV"], ["label", "1", "noop"]):
        res = runner.invoke(app, [*args, "--db", str(missing)])
        assert res.exit_code == 1 and "error:" in res.stderr and "Invalid value" not in res.stderr, res.stderr


def test_shell_completion_offers_commands_and_choices():
    """What `edge-plm --install-completion` installs asks the program for the candidates."""
    def complete(words: str, cword: int) -> list[str]:
        env = {"_EDGE_PLM_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        res = runner.invoke(app, [], prog_name="edge-plm", env=env)
        assert res.exit_code == 0, res.output
        return res.stdout.split()

    assert complete("edge-plm mo", 1) == ["model"]
    assert complete("edge-plm log --label ", 3) == ["ON", "OFF", "NOOP", "none"]
    assert complete("edge-plm export --format ", 3) == ["jsonl", "csv"]


@pytest.mark.parametrize("path", [[], ["log"], ["model", "import"], ["doctor"]], ids=lambda p: " ".join(p) or "edge-plm")
def test_flags_show_no_type_and_debug_is_listed(path):
    res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    assert "<bool>" not in res.output
    assert "<int" in res.output or "<path>" in res.output or not path  # value options keep theirs
    if not path:
        assert "--debug" in res.output and "--version" in res.output


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "edge-plm")
def test_help_shows_plain_metavars(path):
    """Issue 27 item 16: no Python types (`<list[Path]>`, `<int range>`) and no `{name}`
    placeholders; arguments are NAME, [NAME]... as in click's plain help; a help text's
    `<...>` is not swallowed as markup."""
    import re

    out = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).output
    assert not re.search(r"<list\[| range>|\{[a-z_]+\}|\{[A-Z_]+\}", out), out
    usage = next(line for line in out.splitlines() if "Usage:" in line)
    assert all(w.isupper() or w.startswith(("[", "-")) or w in ("Usage:", "root", *path)
               for w in usage.split()), usage


def test_argument_metavars_read_as_in_the_readme():
    def usage(*path):
        out = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).output
        return next(line for line in out.splitlines() if "Usage:" in line).split("[OPTIONS]")[1].strip()

    assert usage("replay") == "SESSION"
    assert usage("label") == "ID ACTION"
    assert usage("forget") == "[ID]..."
    assert usage("model", "export") == "VERSION OUT"
    out = runner.invoke(app, ["forget", "--help"], env={"COLUMNS": "200"}).output
    assert "<int>..." in out
