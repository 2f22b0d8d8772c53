"""Fault injection against the real commands (issue 11): each scenario runs `edge-plm` as a
person or systemd would, breaks something, and checks what the commands then claim.

Scenarios (a registry: each is one function taking the parsed arguments and returning a dict
with ``"ok"`` plus its measurements):

- ``full-disk``: `replay` and `run` with their database and checkpoints on a small tmpfs that
  fills up (root only: it mounts one). Pass when `replay` exits non-zero with one `error:`
  line, no traceback, and the database holds what the error says was stored (and no summary is
  printed); when `run` stores or reports as "not stored" every input it was given; and when
  the database passes ``PRAGMA integrity_check`` afterwards.
- ``busy``: `label` and `forget` commands (alternating) while a `replay` of 3,200 lines writes
  the same database. Pass when none fails (with "database is locked" or otherwise) and at
  least 15 of each ran while the replay was writing.

- ``kill_replay``, ``kill_run``, ``soak``, ``gate``: the learning state under kill -9, a long
  soak and the holdout gate (`benchmarks/faults_state.py`, which describes each).
- ``sigterm_run``, ``sigterm_replay``, ``swap``, ``long_wav``: clean stops under SIGTERM at
  random moments, a checkpoint file swapped for another model's, and the peak memory of the
  longest WAV allowed (`benchmarks/faults_stops.py`, which describes each).
- ``forget``: secret words replayed, `forget` of some ids and `forget --all`, then every file
  under the state dir and the commands' log searched for them, also after a rollback to every
  listed version (`benchmarks/faults_forget.py`).
- ``two_dbs``, ``backup_copy``, ``kill_forget``: a database owns its files — two databases in one
  folder, a `db backup` copy changed every way, and `forget` killed by SIGKILL and SIGTERM after
  each of its checkpoint rewrites (`benchmarks/faults_files.py`, which describes each).
- ``stem_copies``, ``forget_under_run``, ``import_old_export``, ``long_first_label``: copies of
  one stem in one folder, a forget killed while the service runs, an export made before a
  forget imported again, a 100-word first label (`benchmarks/faults_identity.py`, issue 47).

Usage (repo root): python3 benchmarks/bench_faults.py --scenario full-disk [--scenario busy]
                   python3 benchmarks/bench_faults.py --scenario all
Writes benchmarks/results/faults-<scenario>.json and prints a markdown summary.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import REPO, describe, header, write_result  # noqa: E402

PY = sys.executable
CLI = [PY, "-m", "edge_plm.cli"]
HOUSEHOLDS = REPO / "benchmarks" / "data" / "households"
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
       "PYTHONPATH": str(REPO)}

Scenario = Callable[[argparse.Namespace], dict]
SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        SCENARIOS[name] = fn
        return fn
    return register


# --- helpers ----------------------------------------------------------------------------------
def session_lines(n: int) -> list[str]:
    """The first `n` lines of household-text-0, -1, ... concatenated (text, label)."""
    out: list[str] = []
    k = 0
    while len(out) < n:
        path = HOUSEHOLDS / f"household-text-{k % 8}.jsonl"
        out += [line for line in path.read_text().splitlines() if line.strip()]
        k += 1
    return out[:n]


def write_session(path: Path, n: int) -> Path:
    path.write_text("\n".join(session_lines(n)) + "\n")
    return path


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def db_facts(db: Path) -> dict:
    """Rows and integrity of a database, read without writing (mode=ro)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return {"interactions": conn.execute("SELECT count(*) FROM interactions").fetchone()[0],
                "labelled": conn.execute("SELECT count(label) FROM interactions").fetchone()[0],
                "integrity": conn.execute("PRAGMA integrity_check").fetchone()[0]}
    finally:
        conn.close()


class Tmpfs:
    """A tmpfs of `mb` MB mounted on a fresh directory (root only); unmounted on exit."""

    def __init__(self, mb: float) -> None:
        self.mb = mb
        self.dir = Path(tempfile.mkdtemp(prefix="edge-plm-fault-"))

    def __enter__(self) -> Path:
        if os.geteuid() != 0:
            raise SystemExit("full-disk needs root (it mounts a small tmpfs)")
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={int(self.mb * 1024)}k,mode=0700",
                        "tmpfs", str(self.dir)], check=True)
        return self.dir

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["umount", str(self.dir)], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


# --- full disk --------------------------------------------------------------------------------
def _full_disk_replay(args: argparse.Namespace, work: Path) -> dict:
    session = write_session(work / "session.jsonl", args.lines)
    with Tmpfs(args.tmpfs_mb) as mnt:
        db = mnt / "edge-plm.db"
        t0 = time.perf_counter()
        proc = subprocess.run([*CLI, "replay", str(session), "--db", str(db), "--json"],
                              capture_output=True, text=True, env=ENV, cwd=REPO, timeout=3600)
        seconds = time.perf_counter() - t0
        facts = db_facts(db)
        used = shutil.disk_usage(mnt)
    errors = error_lines(proc.stderr)
    m = re.search(r"line (\d+) of (\d+)", errors[0]) if errors else None
    stopped_at = int(m.group(1)) if m else None
    summary = None
    if proc.stdout.strip():
        summary = json.loads(proc.stdout)
    out = {"lines": args.lines, "tmpfs_mb": args.tmpfs_mb, "exit_code": proc.returncode,
           "error_lines": errors, "tracebacks": proc.stderr.count("Traceback"),
           "stderr_lines": len(proc.stderr.splitlines()), "summary_printed": summary is not None,
           "stopped_at_line": stopped_at, "db": facts, "disk_used_bytes": used.used,
           "seconds": round(seconds, 2)}
    if proc.returncode == 0:
        # the disk did not fill: then the summary must match what is stored
        out["ok"] = (summary is not None and summary["interactions"] == facts["interactions"]
                     and facts["integrity"] == "ok")
        out["note"] = "the disk did not fill: use more --lines or a smaller --tmpfs-mb"
    else:
        out["ok"] = (len(errors) == 1 and out["tracebacks"] == 0 and summary is None
                     and stopped_at is not None
                     and stopped_at - 1 <= facts["interactions"] <= stopped_at
                     and facts["integrity"] == "ok")
    return out


def _full_disk_run(args: argparse.Namespace, work: Path) -> dict:
    texts = [json.loads(line)["text"] for line in session_lines(args.lines)]
    with Tmpfs(args.tmpfs_mb) as mnt:
        config = work / "run.toml"
        config.write_text(f'[paths]\nstate_dir = "{mnt}"\n[audio]\nsource = "text"\n'
                          '[gpio]\npin_factory = "mock"\n[policy]\nask_window_s = 0.01\n'
                          "override_window_s = 0.01\n")
        t0 = time.perf_counter()
        proc = subprocess.run([*CLI, "run", "--config", str(config)], input="\n".join(texts) + "\n",
                              capture_output=True, text=True, env=ENV, cwd=REPO, timeout=3600)
        seconds = time.perf_counter() - t0
        facts = db_facts(mnt / "edge-plm.db")
    log = proc.stdout + proc.stderr
    not_stored = len(re.findall(r"ERROR edge_plm\.controller: interaction not stored", log))
    stored = facts["interactions"]
    out = {"inputs": len(texts), "exit_code": proc.returncode, "stored": stored,
           "reported_not_stored": not_stored, "tracebacks": log.count("Traceback"),
           "label_not_stored": len(re.findall(r"label of interaction \d+ not stored", log)),
           "db": facts, "seconds": round(seconds, 2)}
    out["ok"] = (stored + not_stored == len(texts) and out["tracebacks"] == 0
                 and facts["integrity"] == "ok")
    if not_stored == 0:
        out["note"] = "the disk did not fill: use more --lines or a smaller --tmpfs-mb"
    return out


@scenario("full-disk")
def full_disk(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="edge-plm-bench-") as tmp:
        work = Path(tmp)
        replay = _full_disk_replay(args, work)
        run = _full_disk_run(args, work)
    return {"replay": replay, "run": run, "ok": replay["ok"] and run["ok"]}


# --- racing writers ---------------------------------------------------------------------------
@scenario("busy")
def busy(args: argparse.Namespace) -> dict:
    """`label` and `forget` (alternating, `--commands` of them) while a replay writes."""
    with tempfile.TemporaryDirectory(prefix="edge-plm-bench-") as tmp:
        work = Path(tmp)
        work.chmod(0o700)
        session = write_session(work / "session.jsonl", max(args.lines, 3200))
        db = work / "edge-plm.db"
        replay = subprocess.Popen([*CLI, "replay", str(session), "--db", str(db), "--json"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=ENV, cwd=REPO)
        while not db.exists() or db_count(db) < 50:  # let it get going
            time.sleep(0.2)
        results = []
        for k in range(args.commands):
            iid = 2 * k + 1
            if k % 2 == 0:
                cmd = ["label", str(iid), "NOOP"]
            else:
                cmd = ["forget", str(iid), "--yes"]
            running = replay.poll() is None
            proc = subprocess.run([*CLI, *cmd, "--db", str(db), "--json"], capture_output=True,
                                  text=True, env=ENV, cwd=REPO, timeout=600)
            results.append({"command": cmd[0], "id": iid, "exit_code": proc.returncode,
                            "during_replay": running,
                            "locked": "locked" in proc.stderr,
                            "error": error_lines(proc.stderr)[:1]})
        out_r, err_r = replay.communicate(timeout=3600)
    during = [r for r in results if r["during_replay"]]
    labels = sum(r["command"] == "label" for r in during)
    forgets = sum(r["command"] == "forget" for r in during)
    out = {"commands": len(results), "during_replay": len(during),
           "labels_during_replay": labels, "forgets_during_replay": forgets,
           "locked_failures": sum(r["locked"] for r in results),
           "failures": sum(r["exit_code"] != 0 for r in results),
           "replay_exit_code": replay.returncode, "replay_error": error_lines(err_r)[:1],
           "results": results}
    need = min(15, args.commands // 2)  # issue 11: 15 label commands during a replay
    out["ok"] = (out["failures"] == 0 and replay.returncode == 0
                 and labels >= need and forgets >= need)
    return out


def db_count(db: Path) -> int:
    try:
        return db_facts(db)["interactions"]
    except sqlite3.Error:
        return 0


# --- the learning state: kill -9, soak, the gate (faults_state.py) ----------------------------
import faults_state  # noqa: E402

SCENARIOS.update(faults_state.SCENARIOS)

# --- stops, checked files, bounded input (faults_stops.py, issue 19) --------------------------
import faults_stops  # noqa: E402

SCENARIOS.update(faults_stops.SCENARIOS)

# --- forget means forgotten (faults_forget.py, issue 19) --------------------------------------
import faults_forget  # noqa: E402

SCENARIOS.update(faults_forget.SCENARIOS)

# --- a database owns its files (faults_files.py, issue 27) -------------------------------------
import faults_files  # noqa: E402

SCENARIOS.update(faults_files.SCENARIOS)

# --- nothing lost to a renamed copy, an old import or a long sentence (faults_identity.py) ------
import faults_identity  # noqa: E402

SCENARIOS.update(faults_identity.SCENARIOS)


# --- main -------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", action="append", choices=[*sorted(SCENARIOS), "all"],
                    required=True, help="scenario to run (repeatable; all: every one)")
    ap.add_argument("--lines", type=int, default=800, help="session lines (full-disk, busy)")
    ap.add_argument("--tmpfs-mb", type=float, default=2.0, help="full-disk: tmpfs size (MB)")
    ap.add_argument("--commands", type=int, default=40, help="busy: label/forget commands")
    ap.add_argument("--kills", type=int, default=20, help="kill_replay/kill_run: SIGKILLs")
    ap.add_argument("--soak-lines", type=int, default=2000, help="soak, forget: interactions")
    ap.add_argument("--sigterms-run", type=int, default=50, help="sigterm_run: SIGTERMs to run")
    ap.add_argument("--sigterms-replay", type=int, default=20,
                    help="sigterm_replay: SIGTERMs to replay")
    ap.add_argument("--seed", type=int, default=0, help="kill moments, orders")
    args = ap.parse_args(argv)
    names = sorted(SCENARIOS) if "all" in args.scenario else list(dict.fromkeys(args.scenario))
    ok = True
    for name in names:
        payload = {**header(), "scenario": name, "result": SCENARIOS[name](args)}
        path = write_result(f"faults-{name}", payload)
        result = payload["result"]
        verdict = {True: "PASS", False: "FAIL", None: "measured"}[result.get("ok")]
        ok &= result.get("ok") is not False
        print(f"## {name}: {verdict}\n{describe(payload)}\n")
        brief = {k: v for k, v in result.items() if k not in ("results", "runs")}
        print("```json\n" + json.dumps(brief, indent=1) + "\n```")
        print(f"(written to {path.relative_to(REPO)})\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
