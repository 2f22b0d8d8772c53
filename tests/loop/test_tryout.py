"""`edge-plm run --audio FILE...`: the loop on WAV files with simulated pins, the keys on a pipe
flipping the simulated switch (real CLI subprocesses, pocketsphinx, SQLite)."""

from __future__ import annotations

import os
import pty
import select
import shutil
import sqlite3
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from edge_plm.loop.tryout import audio_paths
from edge_plm.voice.audio import AudioError

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "edge_plm" / "data" / "demo"
ON = DEMO / "lights-on-please.slt.wav"  # the starting model acts ON on it
MUSIC = DEMO / "play-some-music.awb.wav"


def config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[paths]\nstate_dir = "{tmp_path / "state"}"\n{extra}')
    return path


def start(cfg: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "edge_plm.cli", "run", "--config", str(cfg), *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)


def after_loading(stderr: str) -> list[str]:
    """The stderr lines after the `loading ...` line a slow command prints first (issue 27)."""
    lines = stderr.strip().splitlines()
    assert lines and lines[0] == "loading speech recognition and the model...", stderr
    return lines[1:]


def read_until(proc: subprocess.Popen, marker: str, lines: list[str]) -> None:
    """Read stdout lines into `lines` until one contains `marker` (or stdout ends)."""
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if marker in line:
            return


def finish(proc: subprocess.Popen, lines: list[str], timeout: float = 120) -> str:
    """The rest of stdout into `lines`; stderr. Killed if it does not end within `timeout`."""
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        lines += [line.rstrip("\n") for line in proc.stdout]
        err = proc.stderr.read()
        proc.wait()
    finally:
        timer.cancel()
    return err


@pytest.mark.parametrize("mode", ["toggle", "momentary"])
def test_a_space_on_the_pipe_flips_the_simulated_switch(tmp_path, mode):
    cfg = config(tmp_path, f'[gpio]\nswitch_mode = "{mode}"\n')
    proc = start(cfg, "--gap", "0", "--audio", str(ON))
    lines: list[str] = []
    read_until(proc, "[1/1]", lines)
    assert lines[-1].endswith("act, relay ON"), lines
    proc.stdin.write(" \n")  # the person flips it back off (space, then Enter: a pipe is line-based)
    proc.stdin.flush()
    err = finish(proc, lines)
    assert proc.returncode == 0, err
    assert "playing 1 file(s)" in lines[0] and "GPIO simulated" in lines[0], (lines, err)
    assert "heard 'lights on please' -> ON" in lines[1], (lines, err)
    assert any(line.startswith(f"space: switch flipped ({mode}) -> relay OFF") for line in lines), (lines, err)
    # acted ON, the person turned it straight back off: "lights on please" was not a command
    assert "#1 labelled NOOP (acted ON; person reverted to OFF)" in lines, (lines, err)
    assert "Traceback" not in err
    with sqlite3.connect(tmp_path / "state" / "edge-plm.db") as conn:
        label, source = conn.execute("SELECT label, label_source FROM interactions").fetchone()
        assert (label, source) == ("NOOP", "override")
        # simulated pins record no relay state: a service on this database is not affected
        assert conn.execute("SELECT count(*) FROM relay_state").fetchone()[0] == 0


def test_the_default_gap_lets_the_first_file_become_a_label(tmp_path):
    """The README's example: two files, no --gap. The first file's window closes (the person
    let the act stand: a label) before the second file, instead of being superseded by it."""
    proc = start(config(tmp_path), "--audio", str(ON), str(MUSIC))
    lines: list[str] = []
    for line in proc.stdout:  # until the first file's label line (or its "not labelled") ...
        lines.append(line.rstrip("\n"))
        if line.startswith("#1 "):
            break
    seen = list(lines)
    proc.stdin.write("q\n")  # ... then stop: the second file need not play out
    proc.stdin.flush()
    err = finish(proc, lines)
    assert proc.returncode == 0, err
    assert "playing 2 file(s), 11 s apart" in seen[0], seen
    assert "[1/2] lights-on-please.slt.wav: #1 heard 'lights on please' -> ON" in seen[1], seen
    assert seen[-1].startswith("#1 labelled ON"), (seen, err)
    assert not any("superseded" in line for line in lines), lines


def test_a_directory_plays_its_wav_files_and_q_stops(tmp_path):
    folder = tmp_path / "wavs"
    folder.mkdir()
    for i, src in enumerate([ON, MUSIC, ON]):
        shutil.copy(src, folder / f"{i}-{src.name}")
    proc = start(config(tmp_path), "--gap", "30", "--audio", str(folder))
    lines: list[str] = []
    read_until(proc, "[1/3]", lines)
    proc.stdin.write("q\n")
    proc.stdin.flush()
    err = finish(proc, lines)
    assert proc.returncode == 0, err
    assert "playing 3 file(s), 30 s apart" in lines[0]
    assert "q: stopping" in lines and not any(line.startswith("[2/3]") for line in lines)


def test_files_after_audio_as_arguments_and_bad_paths(tmp_path):
    cfg = config(tmp_path)
    bad = subprocess.run([sys.executable, "-m", "edge_plm.cli", "run", "--config", str(cfg),
                          "--audio", str(ON), str(tmp_path / "missing.wav")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert bad.returncode == 2 and after_loading(bad.stderr) == [
        f"error: --audio: {tmp_path / 'missing.wav'}: no such file or directory"]
    loose = subprocess.run([sys.executable, "-m", "edge_plm.cli", "run", "--config", str(cfg), str(ON)],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert loose.returncode == 2 and "audio files go after --audio" in loose.stderr
    assert not (tmp_path / "state").exists()  # nothing was started


def test_a_file_that_is_not_a_wav_is_refused_before_anything_starts(tmp_path):
    cfg = config(tmp_path)
    fake = tmp_path / "fake.wav"
    fake.write_text("not audio at all\n")
    for path in (ROOT / "README.md", fake):
        res = subprocess.run([sys.executable, "-m", "edge_plm.cli", "run", "--config", str(cfg),
                              "--audio", str(ON), str(path)],
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert res.returncode == 2, (res.stdout, res.stderr)
        assert after_loading(res.stderr) == [f"error: --audio: {path}: not a WAV file"]
        assert res.stdout == ""
    assert not (tmp_path / "state").exists()  # no model loaded, no database opened


def test_wav_source_in_the_config_names_run_audio(tmp_path):
    cfg = config(tmp_path, '[audio]\nsource = "wav"\n[gpio]\npin_factory = "mock"\n')
    res = subprocess.run([sys.executable, "-m", "edge_plm.cli", "run", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT, input="")
    assert res.returncode == 2 and "edge-plm run --audio FILE..." in res.stderr
    assert "Traceback" not in res.stderr


def test_audio_paths_expand_directories(tmp_path):
    (tmp_path / "b.wav").write_bytes(b"")
    (tmp_path / "a.WAV").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("x")
    assert audio_paths([tmp_path, ON]) == [tmp_path / "a.WAV", tmp_path / "b.wav", ON]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(AudioError, match="no .wav files"):
        audio_paths([empty])
    with pytest.raises(AudioError, match="no such file"):
        audio_paths([tmp_path / "nope"])
    with pytest.raises(AudioError, match="not a WAV file"):
        audio_paths([tmp_path / "notes.txt"])
    with pytest.raises(AudioError, match="empty file"):
        audio_paths([tmp_path / "b.wav"])


def test_on_a_terminal_a_space_alone_flips_the_switch(tmp_path):
    """On a terminal (a pty here) the keys are read in cbreak mode: no Enter needed, and the
    terminal's mode is given back at the end."""
    cfg = config(tmp_path)
    pid, fd = pty.fork()
    if pid == 0:  # the child: edge-plm run on the pty
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "edge_plm.cli", "run", "--config", str(cfg),
                                  "--gap", "0", "--audio", str(ON)])
    out, sent = b"", False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], 0.5)[0]:
            continue
        try:
            chunk = os.read(fd, 1024)
        except OSError:  # the child closed the pty
            break
        if not chunk:
            break
        out += chunk
        if b"[1/1]" in out and not sent:
            os.write(fd, b" ")  # a space, no Enter
            sent = True
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "space: switch flipped (toggle) -> relay OFF" in text
    assert "#1 labelled NOOP (acted ON; person reverted to OFF)" in text
    assert termios.tcgetattr(fd)[3] & termios.ICANON  # the terminal is line-based again


def test_with_several_devices_a_digit_flips_that_devices_switch(tmp_path):
    cfg = config(tmp_path, '[[devices]]\nname = "lamp"\naliases = ["lights"]\nrelay_pin = 17\nswitch_pin = 27\n'
                 '[[devices]]\nname = "fan"\nrelay_pin = 23\nswitch_pin = 24\n')
    proc = start(cfg, "--gap", "0", "--audio", str(MUSIC))
    lines: list[str] = []
    read_until(proc, "[1/1]", lines)
    proc.stdin.write("2\n")  # the person switches the fan on with its own switch
    proc.stdin.flush()
    err = finish(proc, lines)
    assert proc.returncode == 0, err
    assert "keys 1-2 flip the switch of 1 lamp, 2 fan" in lines[0], (lines, err)
    assert any(line.startswith("2 (fan): switch flipped (toggle) -> relay ON") for line in lines), (lines, err)
    assert "Traceback" not in err


def test_run_says_loading_at_once_and_ends_with_a_summary_line(tmp_path):
    """Issue 27: `loading ...` is the first stderr line, within 1 s of the start (the model and
    pocketsphinx take seconds more), and the run's last stdout line says what it stored."""
    t0 = time.monotonic()
    proc = start(config(tmp_path, "[policy]\nask_window_s = 0.3\noverride_window_s = 0.3\n"),
                 "--audio", str(ON), "--gap", "1")
    first = proc.stderr.readline()
    waited = time.monotonic() - t0
    proc.stdin.close()
    lines: list[str] = []
    err = finish(proc, lines)
    assert proc.returncode == 0, err
    assert first == "loading speech recognition and the model...\n" and waited < 1.0, (first, waited)
    db = tmp_path / "state" / "edge-plm.db"
    (n, labelled), = sqlite3.connect(db).execute("SELECT count(*), count(label) FROM interactions")
    assert (n, labelled) == (1, 1)
    assert lines[-1].startswith("run ended: 1 interaction(s) stored, 1 labelled; model "), lines
    assert lines[-1].endswith(f"; database {db}"), lines


def test_with_several_devices_the_ask_and_flip_lines_name_the_device(tmp_path):
    """The ask line says which device is in doubt and its key; a space (the first device's
    switch) says whose switch it flipped."""
    cfg = config(tmp_path, '[policy]\nask_threshold = 0.0\nact_threshold = 1.0\n'
                 '[[devices]]\nname = "lamp"\naliases = ["lights"]\nrelay_pin = 17\nswitch_pin = 27\n'
                 '[[devices]]\nname = "fan"\nrelay_pin = 23\nswitch_pin = 24\n')
    proc = start(cfg, "--gap", "0", "--audio", str(DEMO / "turn-on-the-light.rms.wav"))  # ON, lamp
    lines: list[str] = []
    read_until(proc, "[1/1]", lines)
    proc.stdin.write(" \n")  # the person answers with the first device's switch
    proc.stdin.flush()
    err = finish(proc, lines)
    assert proc.returncode == 0, err
    heard = next(line for line in lines if line.startswith("[1/1]"))
    assert heard.endswith("ask about lamp (device 1, LED blinks): flip its switch (key 1) the way "
                          "you want it"), (lines, err)
    assert any(line.startswith("space (lamp): switch flipped (toggle) -> relay ON") for line in lines), (lines, err)
