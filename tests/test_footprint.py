"""The service fits a small board (issue 27): `replay` and `run --audio` with pocketsphinx and
the shipped starting model never load Numba or LLVM (the per-label refinement is NumPy,
``switch/segment_kernels.py``), and peak at most 300 MB resident (docs/benchmarks-log.md, "Fits a Pi 3")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "edge_plm" / "data" / "demo"
LIMIT_MB = 300

# the CLI in this process, then what it loaded and its peak RSS (VmHWM) as one JSON line on the
# file descriptor $PROBE_FD
PROBE = """
import atexit, json, os, re, sys
def report():
    hwm = int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
    with os.fdopen(int(os.environ["PROBE_FD"]), "w") as out:
        out.write(json.dumps({"peak_mb": hwm / 1024, "modules": sorted(
            m for m in ("numba", "llvmlite", "scipy.signal") if m in sys.modules)}))
atexit.register(report)
from edge_plm.cli import main
sys.argv = ["edge-plm"] + sys.argv[1:]
main()
"""


def _probe(args: list[str], tmp_path: Path, stdin: str = "") -> tuple[dict, subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OPENBLAS_NUM_THREADS": "1", "EDGE_PLM_CONFIG": os.devnull}
    r, w = os.pipe()
    env["PROBE_FD"] = str(w)
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, input=stdin, text=True,
                          capture_output=True, timeout=600, pass_fds=(w,), cwd=tmp_path)
    os.close(w)
    with os.fdopen(r) as f:
        report = f.read()
    assert proc.returncode == 0, proc.stderr
    return json.loads(report), proc


def test_replay_with_audio_loads_no_numba_and_fits(tmp_path):
    lines = [json.loads(s) for s in (DEMO / "session.jsonl").read_text().splitlines()[:6]]
    session = tmp_path / "s.jsonl"
    session.write_text("".join(json.dumps({**r, "audio": str(DEMO / r["audio"])}) + "\n" for r in lines))
    report, proc = _probe(["replay", str(session), "--db", str(tmp_path / "st" / "edge-plm.db"), "--json"],
                          tmp_path)
    assert json.loads(proc.stdout)["labels"] >= 3  # it learned: the per-label refinement ran
    assert report["modules"] == [], report
    assert report["peak_mb"] <= LIMIT_MB, report


def test_run_audio_loads_no_numba_and_fits(tmp_path):
    state = tmp_path / "state"
    config = tmp_path / "config.toml"
    config.write_text(f'[paths]\nstate_dir = "{state}"\n[policy]\nask_window_s = 0.2\noverride_window_s = 0.2\n')
    report, proc = _probe(["run", "--config", str(config), "--audio", str(DEMO / "lights-on-please.slt.wav"),
                           str(DEMO / "play-some-music.awb.wav"), "--gap", "1"], tmp_path)
    assert "labelled" in proc.stdout, proc.stdout
    assert report["modules"] == [], report
    assert report["peak_mb"] <= LIMIT_MB, report
