"""Peak resident memory of the device's commands, and where it goes (issue 27: fits a Pi 3).

1. Peak RSS (``/usr/bin/time -v``, GNU time: "Maximum resident set size") of real `edge-plm`
   processes: `replay` of the demo session (48 WAV lines, pocketsphinx), `run --audio` on two
   demo WAVs (simulated pins), `demo --limit 12 --rounds 1`, `forget` of 5 ids and `model
   rebuild` on the replayed database, `asr transcribe` of one WAV.
2. The breakdown: one process loads what `replay` and `run --audio` load, step by step, and
   the resident size (VmRSS) after each step is read from /proc/self/status: the CLI's
   imports, the switch model's code, the pocketsphinx decoder, the shipped starting model with
   its learning state, the first labels learned, a WAV read, one decode.

``--tree DIR`` measures another checkout of edge-plm (PYTHONPATH=DIR; e.g. a `git worktree` of
an older commit, for a before/after table); the default is this repository.

Usage (repo root): python3 benchmarks/bench_memory.py [--tree DIR]
Writes benchmarks/results/memory[-TAG].json and prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import REPO, header, write_result  # noqa: E402

GNU_TIME = "/usr/bin/time"
DEMO = "edge_plm/data/demo"

STAGES = r'''
import re, sys, json
def rss():
    return int(re.search(r"VmRSS:\s+(\d+)", open("/proc/self/status").read()).group(1)) / 1024
rows, last = [], rss()
def stage(name):
    global last
    now = rss(); rows.append({"stage": name, "added_mb": round(now - last, 1), "rss_mb": round(now, 1)}); last = now
stage("python")
import edge_plm.cli  # noqa
stage("the CLI's imports (typer, rich, SQLite, NumPy)")
from edge_plm.switch.model import SwitchModel
stage("the switch model's code")
from edge_plm.voice.asr import PocketSphinxASR
asr = PocketSphinxASR()
stage("the pocketsphinx decoder (en-us)")
m = SwitchModel.load("models/switch-en.npz")
stage("the starting model with its learning state")
for t, y in (("turn on the light", "ON"), ("lights off", "OFF"), ("play music", "NOOP"), ("lamp on", "ON")):
    m.learn(t, y)
stage("the first labels learned")
from edge_plm.voice.pcm import read_wav
x = read_wav("edge_plm/data/demo/lights-on-please.slt.wav")
stage("a WAV read")
asr.transcribe(x[0])
stage("one decode")
peak = int(re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1)) / 1024
print(json.dumps({"stages": rows, "peak_mb": round(peak, 1),
                  "numba_loaded": "numba" in sys.modules, "scipy_loaded": sorted(
                      m for m in sys.modules if m in ("scipy.signal", "scipy.sparse", "scipy.linalg"))}))
'''


def peak_mb(cmd: list[str], env: dict, cwd: Path) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        proc = subprocess.run([GNU_TIME, "-v", "-o", out.name, *cmd], env=env, cwd=cwd,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1800)
        report = out.read()
    kb = next(int(line.split(":")[1]) for line in report.splitlines() if "Maximum resident" in line)
    return {"peak_mb": round(kb / 1024, 1), "exit_code": proc.returncode,
            "error": [line for line in proc.stderr.splitlines() if line.startswith("error:")][:1]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=REPO, help="the edge-plm checkout to measure")
    ap.add_argument("--tag", default="", help="results file suffix (memory-TAG.json)")
    args = ap.parse_args(argv)
    if not Path(GNU_TIME).exists():
        raise SystemExit(f"{GNU_TIME} (GNU time) is needed: apt-get install time")
    tree = args.tree.resolve()
    work = Path(tempfile.mkdtemp(prefix="edge-plm-memory-"))
    try:
        work.chmod(0o700)
        config = work / "run.toml"
        config.write_text(f'[paths]\nstate_dir = "{work / "state"}"\n')
        env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
               "EDGE_PLM_CONFIG": os.devnull, "XDG_DATA_HOME": str(work / "xdg")}
        cli = [sys.executable, "-m", "edge_plm.cli"]
        db = str(work / "replayed" / "edge-plm.db")
        commands = {
            "replay (demo session, 48 WAV lines)": [*cli, "replay", f"{DEMO}/session.jsonl", "--db", db, "--json"],
            "run --audio (2 demo WAVs)": [*cli, "run", "--config", str(config), "--audio",
                                          f"{DEMO}/lights-on-please.slt.wav", f"{DEMO}/play-some-music.awb.wav",
                                          "--gap", "1"],
            "demo --limit 12 --rounds 1": [*cli, "demo", "--limit", "12", "--rounds", "1"],
            "forget of 5 ids": [*cli, "forget", "1", "2", "3", "4", "5", "--yes", "--db", db],
            "model rebuild": [*cli, "model", "rebuild", "--db", db],
            "asr transcribe (pocketsphinx)": [*cli, "asr", "transcribe", f"{DEMO}/lights-on-please.slt.wav",
                                              "--backend", "pocketsphinx"],
        }
        peaks = {name: peak_mb(cmd, env, tree) for name, cmd in commands.items()}
        stages = json.loads(subprocess.run([sys.executable, "-c", STAGES], env=env, cwd=tree, capture_output=True,
                                           text=True, check=True, timeout=600).stdout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    git = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    result = {"tree_commit": git.stdout.strip() or None, "commands": peaks, **stages}
    head = header()
    if tree != REPO:  # the other checkout by its commit, not by where it was on this machine
        for shown in (os.path.relpath(tree, REPO), str(args.tree)):
            head["command"] = head["command"].replace(shown, f"<a checkout of {result['tree_commit']}>")
    path = write_result("memory" + (f"-{args.tag}" if args.tag else ""), {**head, "result": result})
    print(f"tree at {result['tree_commit']}\n\n| command | peak RSS MB | exit |\n|---|---|---|")
    for name, p in peaks.items():
        print(f"| `{name}` | {p['peak_mb']:.0f} | {p['exit_code']} |")
    print("\n| step | adds MB | RSS MB |\n|---|---|---|")
    for s in stages["stages"]:
        print(f"| {s['stage']} | {s['added_mb']:+.0f} | {s['rss_mb']:.0f} |")
    print(f"\npeak {stages['peak_mb']:.0f} MB; numba loaded: {stages['numba_loaded']}; "
          f"scipy: {stages['scipy_loaded']}\n(written to {path.relative_to(REPO)})")
    return 0 if all(p["exit_code"] == 0 for p in peaks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
