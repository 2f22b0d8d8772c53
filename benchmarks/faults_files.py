"""A database owns its files (issue 27), run by `benchmarks/bench_faults.py --scenario NAME`.
Every step is the real `edge-plm` in its own process, on text sessions (household lines, mock
pins, 0.01 s label windows, a candidate version every 40 labels so that a short session leaves
several kept checkpoints).

- ``two_dbs``: two databases in one folder (`a.db`, `b.db`), each filled by a `replay` of the
  same 200 lines; then both used: `status`, another `replay` into a, `model rebuild` of b,
  `forget` of two ids in a, `label` in b. Counted after the replays and after the use: versions
  `model list` shows damaged or whose file is not the one its record says, checkpoint files
  both databases' rows name, stored paths outside the database's own ``<stem>.checkpoints/``,
  a shared ``checkpoints/`` folder. Pass: all 0.
- ``backup_copy``: a `replay` of 200 lines, then `db backup` into another folder, and on the
  copy: `forget` of five ids, `model rebuild`, `model import` (--force) of a version the
  original exports, `forget --all`. Pass: every file of the original's checkpoint folder
  byte-identical to before the backup, its `model list --json` equal, 0 damaged versions in
  either, every path the copy stores inside its own folder.
- ``kill_forget``: a `replay` of 200 lines with made-up words in 6 of them (labelled ON and
  NOOP, early, so that every kept checkpoint holds them); `forget` of those rows is then
  killed after its k-th checkpoint rewrite, for every k (1 .. the versions it rewrites), by
  SIGKILL and by SIGTERM, each on a fresh copy of the state dir (`cp -a`). To stop it exactly
  there, the forget runs through a wrapper that sets the module's test hook
  (`edge_plm.learning.forgetting.after_rewrite`, called after each version is rewritten) to
  write a marker file and sleep; this process waits for the marker and sends the signal. Then
  the next start of the service (`edge-plm run`, text source, empty input). Pass, for every
  stop: the rows were gone and the journal (``forget_owed``) named what was left when it
  stopped; after the start the journal is empty, 0 files under the state dir hold any of the
  words, `model rollback` to every version `model list` shows with a file is accepted and the
  active checkpoint then holds no forgotten interaction.

Writes benchmarks/results/faults-<scenario>.json (through bench_faults.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CLI = [sys.executable, "-m", "edge_plm.cli"]
HOUSEHOLDS = ROOT / "benchmarks" / "data" / "households"
BASE_ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
            "PYTHONPATH": str(ROOT)}
SECRETS = ("xylofrump", "quandoberry")
SECRET_LINES = {3: ("my bank pin is xylofrump seven", "NOOP"),
                9: ("turn on the quandoberry light", "ON"),
                21: ("remind me xylofrump is at nine", "NOOP"),
                30: ("quandoberry lights on please", "ON"),
                44: ("xylofrump turn the light on", "ON"),
                60: ("call quandoberry tomorrow", "NOOP")}

# the forget, stopped after its k-th checkpoint rewrite: argv = k, marker file, the command
STOPPED_FORGET = """
import sys, time
from pathlib import Path
from edge_plm.learning import forgetting
stop_after, marker = int(sys.argv[1]), Path(sys.argv[2])
done = []
def hook(version):
    done.append(version)
    if len(done) == stop_after:
        marker.write_text(version)
        time.sleep(600)  # the signal comes here
forgetting.after_rewrite = hook
from edge_plm.cli import main
sys.argv = ["edge-plm"] + sys.argv[3:]
main()
"""


def household_lines(n: int, secrets: bool = False) -> list[dict]:
    rows = []
    for f in sorted(HOUSEHOLDS.glob("household-text-*.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    out = [{"text": rows[i]["text"], "label": rows[i]["label"]} for i in range(n)]
    if secrets:
        for i, (text, label) in SECRET_LINES.items():
            out[i] = {"text": text, "label": label}
    return out


class Device:
    """A database in `state`, its config (text source, mock pins, a version every 40 labels)
    and the stderr of every command run on it."""

    def __init__(self, state: Path, db_name: str = "edge-plm.db") -> None:
        self.state = state
        state.mkdir(parents=True, exist_ok=True)
        state.chmod(0o700)
        self.db = state / db_name
        self.config = state.parent / f"{state.name}.{self.db.stem}.toml"
        self.config.write_text(f'[paths]\nstate_dir = "{state}"\n[audio]\nsource = "text"\n'
                               '[gpio]\npin_factory = "mock"\n[policy]\nask_window_s = 0.01\n'
                               'override_window_s = 0.01\n[model]\nversion_every = 40\n'
                               'version_growth = 0.0\n')
        self.env = {**BASE_ENV, "EDGE_PLM_CONFIG": str(self.config)}
        self.log: list[str] = []

    def cli(self, *args: str, check: bool = True, db: bool = True, stdin: str | None = None
            ) -> subprocess.CompletedProcess:
        cmd = [*CLI, *args, *(["--db", str(self.db)] if db else [])]
        res = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=1800,
                             input=stdin if stdin is not None else "", cwd=ROOT)
        self.log.append(f"$ edge-plm {' '.join(args)}\n{res.stderr}")
        if check and res.returncode != 0:
            raise RuntimeError(f"edge-plm {' '.join(args)}: rc {res.returncode}: {res.stderr[-800:]}")
        return res

    def json(self, *args: str):
        return json.loads(self.cli(*args, "--json").stdout)

    def replay(self, rows: list[dict], name: str = "session.jsonl") -> dict:
        path = self.state.parent / f"{self.db.stem}.{name}"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return self.json("replay", str(path), "--config", str(self.config))  # replay reads no config unless given

    def checkpoints(self) -> Path:
        return self.state / f"{self.db.stem}.checkpoints"

    def stored_paths(self) -> list[str]:
        return [p for p, in _query(self.db, "SELECT path FROM model_versions WHERE path IS NOT NULL")]

    def damaged(self) -> list[str]:
        """Versions `model list` shows damaged, or whose file does not match its record."""
        from edge_plm.learning import trust

        return [d["version"] for d in self.json("model", "list")
                if d.get("damaged") or (d["checkpoint_exists"] and trust.file_problem(d))]

    def foreign_paths(self) -> list[str]:
        """Stored checkpoint paths that are not inside the database's own folder."""
        own = f"{self.db.stem}.checkpoints/"
        return [p for p in self.stored_paths() if not p.startswith(own)]

    def files(self) -> dict[str, bytes]:
        d = self.checkpoints()
        return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}

    def hits(self, words) -> list[str]:
        """Files under the state dir whose bytes hold any of `words`."""
        return [str(p.relative_to(self.state)) for p in sorted(self.state.rglob("*"))
                if p.is_file() and any(w.encode() in p.read_bytes() for w in words)]

    def held_interactions(self, version_path: str) -> set[int]:
        from edge_plm.plm import checkpoint

        _, meta = checkpoint.load(self.state / version_path)
        return {int(i) for i, _ in meta.get("interaction_keys") or []}


def _query(db: Path, sql: str, params=()) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def _facts(dev: Device) -> dict:
    return {"versions": len(dev.stored_paths()), "damaged": dev.damaged(),
            "paths_outside_own_folder": dev.foreign_paths()}


# --- two databases in one folder ---------------------------------------------------------------
def two_dbs(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="faults-two-"))
    try:
        folder = work / "two"
        a, b = Device(folder, "a.db"), Device(folder, "b.db")
        rows = household_lines(200)
        a.replay(rows)
        b.replay(rows)
        filled = {"a": _facts(a), "b": _facts(b)}
        status = a.cli("status", check=False)
        a.replay(household_lines(300)[200:], name="more.jsonl")
        rebuilt = b.json("model", "rebuild")["version"]
        forgot = a.json("forget", "1", "2", "--yes")["deleted"]
        b.cli("label", "3", "NOOP")
        used = {"a": _facts(a), "b": _facts(b)}
        shared = sorted(set(a.stored_paths()) & set(b.stored_paths()))
        out = {"after_replays": filled, "after_use": used, "status_a_exit": status.returncode,
               "status_a_says_damaged": "damaged" in status.stdout + status.stderr,
               "rebuilt_b": rebuilt, "forgotten_a": forgot, "shared_paths": shared,
               "shared_checkpoints_folder": (folder / "checkpoints").exists(),
               "folders": sorted(p.name for p in folder.iterdir() if p.is_dir())}
        out["ok"] = (status.returncode == 0 and not out["status_a_says_damaged"] and not shared
                     and not out["shared_checkpoints_folder"]
                     and all(not f["damaged"] and not f["paths_outside_own_folder"] and f["versions"] >= 2
                             for facts in (filled, used) for f in facts.values()))
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- a backup and what is done to it ------------------------------------------------------------
def backup_copy(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="faults-backup-"))
    try:
        dev = Device(work / "state")
        dev.replay(household_lines(200))
        files = dev.files()
        listed = dev.json("model", "list")
        (work / "bk").mkdir(mode=0o700)
        backup = dev.json("db", "backup", str(work / "bk" / "backup.db"))
        copy = Device(work / "bk", "backup.db")
        steps = {"backup": {k: backup.get(k) for k in ("checkpoints_copied", "checkpoints_missing")},
                 "copy_damaged_at_start": copy.damaged()}
        steps["forget_5"] = copy.json("forget", "1", "2", "3", "4", "5", "--yes")["deleted"]
        steps["rebuild"] = copy.json("model", "rebuild")["version"]
        exported = work / "exported.npz"
        version = listed[0]["version"]
        dev.cli("model", "export", version, str(exported))
        imported = copy.json("model", "import", str(exported), "--force")
        steps["import"] = {"from_original": version, "version": imported.get("version")}
        steps["forget_all"] = copy.json("forget", "--all", "--yes")["deleted"]
        after = dev.files()
        changed = sorted(k for k in set(files) | set(after) if files.get(k) != after.get(k))
        out = {"original_versions": len(listed), "original_files": len(files), "steps": steps,
               "original_files_changed": changed,
               "original_model_list_unchanged": dev.json("model", "list") == listed,
               "original_damaged": dev.damaged(), "copy_damaged": copy.damaged(),
               "copy_paths_outside_own_folder": copy.foreign_paths(),
               "copy_files": len(copy.files())}
        out["ok"] = (not changed and out["original_model_list_unchanged"] and not out["original_damaged"]
                     and not out["copy_damaged"] and not steps["copy_damaged_at_start"]
                     and not out["copy_paths_outside_own_folder"]
                     and backup.get("checkpoints_copied", 0) >= 2 and not backup.get("checkpoints_missing"))
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- forget killed at each checkpoint rewrite ---------------------------------------------------
def _stopped_forget(dev: Device, ids: list[int], k: int, sig: signal.Signals) -> dict:
    marker = dev.state.parent / f"stop-{k}-{sig.name}.marker"
    cmd = [sys.executable, "-c", STOPPED_FORGET, str(k), str(marker), "forget", *map(str, ids),
           "--yes", "--db", str(dev.db)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=dev.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    while not marker.exists() and proc.poll() is None and time.perf_counter() - t0 < 1200:
        time.sleep(0.05)
    stopped_at = marker.read_text() if marker.exists() else None
    if stopped_at is not None:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=600)
    return {"k": k, "signal": sig.name, "stopped_after_version": stopped_at, "exit_code": proc.returncode,
            "forget_s": round(time.perf_counter() - t0, 1), "tracebacks": err.count("Traceback"),
            "interrupted_line": next((line for line in err.splitlines() if line.startswith("interrupted")), None)}


def _one_stop(prepared: Path, work: Path, ids: list[int], k: int, sig: signal.Signals) -> dict:
    state = work / f"state-{k}-{sig.name}"
    shutil.copytree(prepared, state, symlinks=True)  # cp -a
    dev = Device(state)
    rec = _stopped_forget(dev, ids, k, sig)
    rec["rows_left"] = _query(dev.db, "SELECT count(*) FROM interactions WHERE " + " OR ".join(
        "transcript LIKE ?" for _ in SECRETS), [f"%{w}%" for w in SECRETS])[0][0]
    rec["owed_when_stopped"] = sorted({v for v, in _query(dev.db, "SELECT version FROM forget_owed")})
    rec["files_with_words_when_stopped"] = len(dev.hits(SECRETS))
    t0 = time.perf_counter()
    start = dev.cli("run", "--config", str(dev.config), db=False, check=False, stdin="")
    rec["next_start"] = {"exit_code": start.returncode, "seconds": round(time.perf_counter() - t0, 1),
                         "logged_finishing": "interrupted forget still owed" in start.stdout + start.stderr}
    rec["owed_after_start"] = _query(dev.db, "SELECT count(*) FROM forget_owed")[0][0]
    rec["files_with_words_after_start"] = dev.hits(SECRETS)
    refused, revived = [], {}
    versions = [d["version"] for d in dev.json("model", "list") if d["checkpoint_exists"]]
    for v in versions:
        res = dev.cli("model", "rollback", v, check=False)
        if res.returncode != 0:
            refused.append(f"{v}: {res.stderr.strip()}")
            continue
        (path,), = _query(dev.db, "SELECT path FROM model_versions WHERE status = 'active'")
        back = dev.held_interactions(path) & set(ids)
        if back:
            revived[v] = len(back)
    rec["rollback_targets"] = versions
    rec["rollbacks_refused"] = refused
    rec["rollbacks_reviving"] = revived
    rec["files_with_words_after_rollbacks"] = dev.hits(SECRETS)
    expected_rc = -signal.SIGKILL if sig == signal.SIGKILL else 128 + signal.SIGTERM
    rec["ok"] = (rec["stopped_after_version"] is not None and rec["exit_code"] == expected_rc
                 and rec["tracebacks"] == 0 and rec["rows_left"] == 0
                 and rec["stopped_after_version"] not in rec["owed_when_stopped"]
                 and rec["next_start"]["exit_code"] == 0 and rec["owed_after_start"] == 0
                 and not rec["files_with_words_after_start"] and not refused and not revived
                 and not rec["files_with_words_after_rollbacks"])
    shutil.rmtree(state, ignore_errors=True)
    return rec


def kill_forget(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="faults-killforget-"))
    try:
        dev = Device(work / "prepared")
        dev.replay(household_lines(200, secrets=True))
        ids = [i for i, in _query(dev.db, "SELECT id FROM interactions WHERE " + " OR ".join(
            "transcript LIKE ?" for _ in SECRETS), [f"%{w}%" for w in SECRETS])]
        kept = [v for v, in _query(dev.db, "SELECT version FROM model_versions WHERE path IS NOT NULL "
                                          "AND status != 'candidate'")]
        before = dev.hits(SECRETS)
        # how many rewrites an uninterrupted forget does: on a copy, to the end
        full = Device(work / "full")
        shutil.rmtree(full.state)
        shutil.copytree(dev.state, full.state, symlinks=True)
        t0 = time.perf_counter()
        done = full.json("forget", *map(str, ids), "--yes")
        full_s = round(time.perf_counter() - t0, 1)
        rewrites = len(done["checkpoints"]["rewritten"]) + len(done["checkpoints"].get("clean", []))
        uninterrupted = {"seconds": full_s, "checkpoints": done["checkpoints"],
                         "files_with_words": full.hits(SECRETS)}
        shutil.rmtree(full.state)
        stops = [_one_stop(dev.state, work, ids, k, sig)
                 for sig in (signal.SIGKILL, signal.SIGTERM) for k in range(1, rewrites + 1)]
        out = {"forgotten_ids": ids, "kept_versions": kept, "files_with_words_before": before,
               "rewrites_per_forget": rewrites, "uninterrupted": uninterrupted,
               "stops": len(stops), "stops_ok": sum(s["ok"] for s in stops), "runs": stops}
        out["ok"] = (rewrites >= 2 and len(before) >= 3 and not uninterrupted["files_with_words"]
                     and all(s["ok"] for s in stops))
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


SCENARIOS = {"two_dbs": two_dbs, "backup_copy": backup_copy, "kill_forget": kill_forget}
