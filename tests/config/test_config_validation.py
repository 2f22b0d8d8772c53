"""`config check` validates values, not only types, and `run` refuses exactly what `check`
refuses (one function: `settings.problems`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from edge_plm.config.file import default_config_toml
from edge_plm.config.settings import ConfigError, Settings, parse, problems

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "edge_plm.cli"]

# case | TOML body (\n: a new line) | what the one error line names
_BAD_TABLE = r"""
unknown-model-config     | [model]\nconfig = "nonexistent"                   | model.config
negative-seed            | [model]\nseed = -1                                | model.seed
negative-relay-pin       | [gpio]\nrelay_pin = -5                            | gpio.relay_pin
relay-pin-too-high       | [gpio]\nrelay_pin = 40                            | gpio.relay_pin
relay-pin-is-switch-pin  | [gpio]\nrelay_pin = 5\nswitch_pin = 5             | both pin 5
led-pin-is-relay-pin     | [gpio]\nled_pin = 17                              | both pin 17
negative-ask-window      | [policy]\nask_window_s = -3                       | policy.ask_window_s
negative-override-window | [policy]\noverride_window_s = -1                  | policy.override_window_s
negative-toggle-interval | [gpio]\nmin_toggle_interval_ms = -100             | gpio.min_toggle_interval_ms
negative-bounce          | [gpio]\nswitch_bounce_ms = -1                     | gpio.switch_bounce_ms
ask-above-act            | [policy]\nask_threshold = 0.9\nact_threshold = 0.5 | ask_threshold
threshold-above-one      | [policy]\nact_threshold = 1.5                     | act_threshold
nan-threshold            | [policy]\nact_threshold = nan                     | finite
infinite-window          | [policy]\nask_window_s = inf                      | finite
zero-sample-rate         | [audio]\nsample_rate = 0                          | audio.sample_rate
min-above-max-utterance  | [audio]\nmin_utterance_ms = 9000\nmax_utterance_ms = 8000 | audio.min_utterance_ms
negative-transcript-cap  | [asr]\nmax_transcript_chars = -1                  | asr.max_transcript_chars
removed-replay-size      | [model]\nreplay_size = 8                          | unknown key 'replay_size'
"""


def _bad_case(row: str) -> tuple[str, tuple[str, str]]:
    case, body, needle = (cell.strip() for cell in row.split("|"))
    return case, (body.replace("\\n", "\n") + "\n", needle)


BAD = dict(_bad_case(row) for row in _BAD_TABLE.strip().splitlines())


def _run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, input=stdin,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"}, timeout=300)


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


@pytest.mark.parametrize("case", sorted(BAD))
def test_check_and_run_refuse_the_same_bad_value(case, tmp_path):
    body, needle = BAD[case]
    config = tmp_path / "config.toml"
    # a usable service config (text input, mock pins) plus the one bad value
    base = {"paths": f'state_dir = "{tmp_path / "state"}"', "audio": 'source = "text"',
            "gpio": 'pin_factory = "mock"'}
    sections = {}
    for block in body.strip().split("["):
        if block:
            head, _, rest = block.partition("]\n")
            sections[head] = rest
    text = ""
    for name in ("paths", "audio", "asr", "gpio", "policy", "model"):
        lines = [base[name]] if name in base else []
        if name in sections:
            lines.append(sections[name].strip())
        if lines:
            text += f"[{name}]\n" + "\n".join(lines) + "\n"
    config.write_text(text)
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        parse(text, str(config))
    check = _one_error_line(_run("config", "check", "--config", str(config)))
    run = _one_error_line(_run("run", "--config", str(config), stdin="turn on the light\n"))
    assert needle in check and needle in run
    assert not (tmp_path / "state" / "edge-plm.db").exists()  # run stopped before anything


def test_defaults_and_generated_config_are_valid():
    assert problems(Settings()) == []
    parse(default_config_toml(), "<generated>")


def test_disabled_led_and_buzzer_may_share_minus_one():
    s = parse("[gpio]\nled_pin = -1\nbuzzer_pin = -1\n")
    assert s.gpio.led_pin == s.gpio.buzzer_pin == -1


def test_every_problem_is_reported_at_once():
    s = Settings()
    s.model.seed = -1
    s.gpio.relay_pin = -5
    s.policy.ask_window_s = -3.0
    found = problems(s)
    assert len(found) == 3 and any("seed" in p for p in found)


def test_check_reports_every_bad_value_one_line_each_and_exits_2(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[model]\nseed = -1\n[gpio]\nrelay_pin = "seventeen"\ncolour = "red"\n'
                      '[policy]\nask_window_s = -3\n')
    proc = _run("config", "check", "--config", str(config))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    errors = proc.stderr.strip().splitlines()
    assert all(line.startswith(f"error: {config}: ") for line in errors), errors
    assert len(errors) == 4, errors
    for needle in ("model.seed", "[gpio].relay_pin: expected int", "unknown key 'colour'",
                   "policy.ask_window_s"):
        assert sum(needle in line for line in errors) == 1, (needle, errors)
    with pytest.raises(ConfigError) as exc:
        parse(config.read_text(), str(config))
    assert exc.value.problems == [line.removeprefix("error: ") for line in errors]
    one = _run("config", "check", "--config", str(config.with_name("missing.toml")))
    assert one.returncode == 2 and len(one.stderr.strip().splitlines()) == 1


def test_check_accepts_a_good_config(tmp_path):
    config = tmp_path / "ok.toml"
    config.write_text('[gpio]\nrelay_pin = 5\nswitch_pin = 6\nled_pin = -1\n[model]\nseed = 3\n')
    proc = _run("config", "check", "--config", str(config))
    assert proc.returncode == 0 and proc.stdout.startswith("ok:"), proc.stderr


def test_generated_config_takes_each_keys_help_from_its_field_metadata(monkeypatch):
    """The help shown next to a key is its field's metadata["help"]; no source is parsed (a
    zipapp or frozen install without config/settings.py's source still gets the help)."""
    import dataclasses
    import inspect

    from edge_plm.config import settings
    from edge_plm.config.file import sections, toml_value

    def no_source(obj):
        raise OSError("no source")

    monkeypatch.setattr(inspect, "getsource", no_source)
    text = default_config_toml()
    helped = 0
    for _name, section in sections():
        for f in dataclasses.fields(section):
            line = f"# {f.name} = {toml_value(getattr(section, f.name))}"
            if settings.help_of(f):
                helped += 1
                assert f"{line}  # {settings.help_of(f)}\n" in text
            else:
                assert f"{line}\n" in text
    assert helped >= 20
    assert "# keep_audio = false  # privacy: audio is not kept unless configured" in text
    assert Settings().asr.vosk_grammar == [] and Settings().asr.vosk_grammar is not Settings().asr.vosk_grammar


def test_problems_come_in_section_order():
    s = Settings()
    s.audio.sample_rate = 0
    s.asr.backend = "nope"
    s.gpio.switch_mode = "nope"
    s.policy.ask_window_s = 0.0
    s.model.seed = -1
    found = problems(s)
    assert [m.split(" ", 1)[0] for m in found] == [
        "audio.sample_rate", "asr.backend", "gpio.switch_mode", "policy.ask_window_s", "model.seed"]


def test_an_unknown_model_config_is_named_alone():
    """model.config = "banana" is answered with the known configurations, not with a hint to
    train a "banana" model for the starting model."""
    s = Settings()
    s.model.config = "banana"
    found = problems(s)
    assert found == ["model.config 'banana' is not a known model configuration (known: orange, potato)"]


def test_generated_config_comments_read_right():
    """No Python names, no cut-off comments, and the header names the command that checks it."""
    text = default_config_toml(path="/etc/edge-plm/config.toml")
    comments = [line.partition("  # ")[2] for line in text.splitlines() if "  # " in line]
    assert comments and not [c for c in comments if "()" in c or c.rstrip().endswith(("...", "…"))]
    assert "`edge-plm config check --config /etc/edge-plm/config.toml`" in text
    assert "doctor --config" not in text
    assert "replay_size" not in text  # removed: it did nothing


def test_a_tilde_in_config_paths_is_the_home_directory(tmp_path, monkeypatch):
    """Issue 27 item 7: `state_dir = "~/edge"` is the home's edge/, never a literal ./~/edge."""
    from typer.testing import CliRunner  # noqa: PLC0415

    from edge_plm.cli import app  # noqa: PLC0415
    from edge_plm.config.settings import load  # noqa: PLC0415

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[paths]\nstate_dir = "~/edge"\naudio_dir = "~/audio"\n')
    p = load(cfg).paths
    assert p.state() == home / "edge" and p.database_path() == home / "edge" / "edge-plm.db"
    assert p.models_path() == home / "edge" / "models" and p.audio_path() == home / "audio"
    r = CliRunner().invoke(app, ["config", "check", "--config", str(cfg)])
    assert r.exit_code == 0 and f"state dir {home / 'edge'}" in r.stdout
    assert not (tmp_path / "~").exists()


def test_the_retired_checkpoints_dir_key_is_not_silently_ignored(caplog):
    from edge_plm.config.settings import parse

    with caplog.at_level("WARNING"):
        parse('[paths]\ncheckpoints_dir = "/srv/ck"\n', "old.toml")
    assert "paths.checkpoints_dir is no longer used" in caplog.text
