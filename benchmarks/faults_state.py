"""Fault-injection scenarios for the learning state (docs/loop.md "Nothing lost, nothing
unbounded"), run by `benchmarks/bench_faults.py --scenario NAME`.

- ``kill_replay``: ``edge-plm replay`` (a subprocess of the real CLI) on one database, killed
  with SIGKILL at a random moment while it runs, ``--kills`` times (each run plays the next
  1,000-line slice of the household text sessions).
- ``kill_run``: ``edge-plm run`` (the service: text source on stdin, mock GPIO, short label
  windows) killed the same way while a feeder writes utterances to its stdin.

  After every kill: ``PRAGMA integrity_check``; no label that was in the database before is
  gone or changed (labels lost); the debris the kill left (``*.tmp`` checkpoint files,
  ``candidate`` version rows) is counted; then the next start is made as the service makes
  it (`Learner.open`, in this process) and must leave ``unlearned_labels`` 0 (computed from
  the database against the live model and against the active checkpoint, as ``edge-plm
  status`` does), no temp file and no candidate row.
- ``soak``: 2,000 text interactions through the real controller in one process (MockFactory
  pins, SQLite, checkpoints on disk; the loop of ``edge-plm replay``): checkpoint directory
  size (max over the run), resident memory after warm-up, interactions/s in the first and
  the last 10 % (interaction 0, which loads the Numba kernels, excluded).
- ``gate``: the 800-line replay of the issue (household-text-0..3): versions, rollbacks,
  false rollbacks (a rollback for a difference within the holdout's noise,
  `commands.status.false_rollback`), candidates passed as "within noise" and the corrections
  they carried, and how many the old margin-only rule would have rolled back.

Writes benchmarks/results/faults-<scenario>.json (through bench_faults.py).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

CLI = [sys.executable, "-m", "edge_plm.cli"]
HOUSEHOLDS = ROOT / "benchmarks" / "data" / "households"
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
       "PYTHONPATH": str(ROOT)}


def text_lines() -> list[dict]:
    """Every household text session, concatenated (1,600 lines)."""
    rows = []
    for f in sorted(HOUSEHOLDS.glob("household-text-*.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return rows


def labels_of(db: Path) -> dict[int, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT id, label FROM interactions WHERE label IS NOT NULL"))


def integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def debris(db: Path, ckdir: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        cands = conn.execute("SELECT count(*) FROM model_versions WHERE status = 'candidate'"
                             ).fetchone()[0]
    return {"tmp_files": len(list(ckdir.glob("*.tmp"))) if ckdir.exists() else 0,
            "candidate_rows": int(cands)}


def start(db: Path, ckdir: Path, settings) -> dict:
    """The next start, as the service makes it; what it left behind."""
    from edge_plm.loop.house import open_learner
    from edge_plm.learning.state import unlearned_in_active
    from edge_plm.store import ReplayStore

    store = ReplayStore(db)
    try:
        t0 = time.perf_counter()
        learner = open_learner(settings, store)  # as the service opens it (ckdir: the db's own)
        seconds = time.perf_counter() - t0
        out = {"unlearned_live": learner.unlearned(),
               "unlearned_labels": unlearned_in_active(store, settings.model.holdout_fraction),
               "start_s": round(seconds, 2)}
    finally:
        store.close()
    out.update({f"after_start_{k}": v for k, v in debris(db, ckdir).items()})
    return out


def check_after_kill(db: Path, ckdir: Path, before: dict[int, str], settings) -> dict:
    now = labels_of(db)
    lost = [i for i, y in before.items() if now.get(i) != y]
    from edge_plm.learning.state import unlearned_in_active
    from edge_plm.store import ReplayStore

    with ReplayStore(db, read_only=True) as store:  # what `edge-plm status` says before it
        missing = unlearned_in_active(store, settings.model.holdout_fraction)
    rec = {"integrity": integrity(db), "labels": len(now), "labels_lost": len(lost),
           "unlearned_before_start": missing,
           **{f"left_{k}": v for k, v in debris(db, ckdir).items()}}
    rec.update(start(db, ckdir, settings))
    rec["labels_after_start"] = labels_of(db)
    return rec


def summarise(records: list[dict]) -> dict:
    return {
        "kills": len(records),
        "integrity_failures": sum(r["integrity"] != "ok" for r in records),
        "labels_lost": sum(r["labels_lost"] for r in records),
        "unlearned_after_start": sum((r["unlearned_labels"] or 0) + r["unlearned_live"]
                                     for r in records),
        "unknown_unlearned": sum(r["unlearned_labels"] is None for r in records),
        "unlearned_before_start": sum(r["unlearned_before_start"] or 0 for r in records),
        "debris_left_by_kills": {"tmp_files": sum(r["left_tmp_files"] for r in records),
                                 "candidate_rows": sum(r["left_candidate_rows"]
                                                       for r in records)},
        "debris_after_start": sum(r["after_start_tmp_files"] + r["after_start_candidate_rows"]
                                  for r in records),
        "labels_in_db_at_end": records[-1]["labels"] if records else 0,
        "median_start_s": sorted(r["start_s"] for r in records)[len(records) // 2]
        if records else None,
    }


# --- scenarios ------------------------------------------------------------------------------
def kill_replay(args) -> dict:
    """Kills land while the replay runs: 1,000-line sessions (10+ s here), killed 1.5–8 s
    after the start; a run that finished before its kill is checked but not counted."""
    from edge_plm.config.settings import Settings

    rng = random.Random(args.seed)
    rows = text_lines()
    work = Path(tempfile.mkdtemp(prefix="faults-replay-"))
    db, ckdir = work / "edge-plm.db", work / "edge-plm.checkpoints"  # the database's own folder
    records = []
    attempt = 0
    while sum(not r["had_finished"] for r in records) < args.kills and attempt < 3 * args.kills:
        part = [rows[(attempt * 350 + i) % len(rows)] for i in range(1000)]
        session = work / f"session-{attempt}.jsonl"
        session.write_text("".join(json.dumps(r) + "\n" for r in part))
        before = labels_of(db) if db.exists() else {}
        proc = subprocess.Popen([*CLI, "replay", str(session), "--db", str(db), "--json"],
                                cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        delay = rng.uniform(1.5, 8.0)
        time.sleep(delay)
        finished = proc.poll() is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        attempt += 1
        if not db.exists():
            continue
        rec = check_after_kill(db, ckdir, before, Settings())
        rec.update(kill=attempt - 1, after_s=round(delay, 2), had_finished=finished)
        rec.pop("labels_after_start")
        records.append(rec)
        print(json.dumps(rec), file=sys.stderr)
    killed = [r for r in records if not r["had_finished"]]
    return {"workdir": str(work), "runs_finished_before_kill": len(records) - len(killed),
            **summarise(killed), "runs": records}


def _service_config(state: Path) -> Path:
    config = state.parent / "config.toml"
    config.write_text(f'[paths]\nstate_dir = "{state}"\n[audio]\nsource = "text"\n'
                      '[gpio]\npin_factory = "mock"\n[policy]\nask_window_s = 0.05\n'
                      'override_window_s = 0.05\n[model]\nversion_every = 5\n')
    return config


def kill_run(args) -> dict:
    from edge_plm.config.settings import load

    rng = random.Random(args.seed + 1)
    rows = text_lines()
    work = Path(tempfile.mkdtemp(prefix="faults-run-"))
    state = work / "state"
    config = _service_config(state)
    settings = load(config)
    db, ckdir = settings.paths.database_path(), settings.paths.checkpoints_path()
    records = []
    cursor = 0
    for k in range(args.kills):
        before = labels_of(db) if db.exists() else {}
        proc = subprocess.Popen([*CLI, "run", "--config", str(config)], cwd=ROOT, env=ENV,
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, text=True)
        stop = threading.Event()

        def feed(start: int, proc=proc, stop=stop) -> None:
            i = start
            while not stop.is_set():
                try:
                    proc.stdin.write(rows[i % len(rows)]["text"] + "\n")
                    proc.stdin.flush()
                except (BrokenPipeError, ValueError, OSError):
                    return
                i += 1
                stop.wait(0.08)

        feeder = threading.Thread(target=feed, args=(cursor,), daemon=True)
        feeder.start()
        delay = rng.uniform(3.0, 9.0)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        stop.set()
        feeder.join(timeout=2)
        cursor += int(delay / 0.08)
        if not db.exists():
            continue
        rec = check_after_kill(db, ckdir, before, settings)
        rec.update(kill=k, after_s=round(delay, 2))
        rec.pop("labels_after_start")
        records.append(rec)
        print(json.dumps(rec), file=sys.stderr)
    return {"workdir": str(work), **summarise(records), "runs": records}


def _rss_mb() -> float:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def soak(args) -> dict:
    from edge_plm.loop.replay import SessionLine, build_replay, run_session
    from edge_plm.decide.policy import Action
    from edge_plm.config.settings import Settings

    rows = text_lines()
    lines = [SessionLine(Action(r["label"]), r["text"])
             for r in (rows * (args.soak_lines // len(rows) + 1))[:args.soak_lines]]
    work = Path(tempfile.mkdtemp(prefix="faults-soak-"))
    db = work / "edge-plm.db"
    ckdir = work / "edge-plm.checkpoints"  # the database's own folder
    rep = build_replay(Settings(), db, seed=args.seed)
    ts, rss, ck = [], [], []

    def progress() -> None:
        ts.append(time.perf_counter())
        rss.append(_rss_mb())
        if len(ts) % 50 == 0:
            ck.append(sum(p.stat().st_size for p in ckdir.glob("*.npz")) / 1e6)

    t0 = time.perf_counter()
    try:
        run_session(lines, rep.controller, rep.clock, progress=progress)
    finally:
        rep.close()
    n = len(ts)
    k = n // 10

    def rate(a: int, b: int) -> float:  # interactions a+1..b over the time they took
        return (b - a) / (ts[b - 1] - ts[a - 1]) if a else (b - 1) / (ts[b - 1] - ts[0])

    first, last = rate(0, k), rate(n - k, n)
    warm = rss[k - 1]
    from edge_plm.learning.state import unlearned_in_active
    from edge_plm.config.settings import Settings as S
    from edge_plm.store import ReplayStore

    with ReplayStore(db) as store:
        versions = store.model_versions()
        unlearned = unlearned_in_active(store, S().model.holdout_fraction)
    return {
        "workdir": str(work), "interactions": n, "seconds": round(ts[-1] - t0, 1),
        "interactions_per_s": {"first_10pct": round(first, 1), "last_10pct": round(last, 1),
                               "ratio": round(last / first, 3)},
        "rss_mb": {"after_warmup_10pct": round(warm, 1), "max_after": round(max(rss[k:]), 1),
                   "end": round(rss[-1], 1), "growth": round(max(rss[k:]) - warm, 1),
                   "every_10pct": [round(rss[i], 1) for i in range(0, n, k)]},
        "checkpoints_mb": {"max_during_run": round(max(ck), 1) if ck else None,
                           "end": round(sum(p.stat().st_size for p in ckdir.glob("*.npz"))
                                        / 1e6, 1),
                           "files_end": len(list(ckdir.glob("*.npz")))},
        "versions": len(versions),
        "pruned": sum(bool((v.metrics or {}).get("pruned")) for v in versions),
        "unlearned_labels_end": unlearned,
        "tmp_files_end": len(list(ckdir.glob("*.tmp"))),
    }


def gate(args) -> dict:
    from edge_plm.commands.status import false_rollback, status  # noqa: PLC0415
    from edge_plm.store import ReplayStore

    work = Path(tempfile.mkdtemp(prefix="faults-gate-"))
    session = work / "s800.jsonl"
    session.write_text("".join(
        (HOUSEHOLDS / f"household-text-{i}.jsonl").read_text() for i in range(4)))
    db = work / "edge-plm.db"
    r = subprocess.run([*CLI, "replay", str(session), "--db", str(db), "--json",
                        "--seed", str(args.seed)], cwd=ROOT, env=ENV, capture_output=True,
                       text=True, check=True)
    summary = json.loads(r.stdout)
    with ReplayStore(db) as store:
        versions = store.model_versions()
        status = status(store).to_dict()
    margin = 0.03
    judged = [v for v in versions if "noise" in (v.metrics or {})]
    within = [v for v in versions if (v.metrics or {}).get("gate") == "passed (within noise)"]
    return {
        "session": "household-text-0..3 (800 lines)", "replay": summary,
        "versions": len(versions), "judged": len(judged),
        "rolled_back": sum(v.status == "rolled_back" for v in versions),
        "false_rollbacks": sum(false_rollback(v) for v in versions),
        "passed_within_noise": [{"version": v.version, "diff": v.metrics["noise"]["diff"],
                                 "se": v.metrics["noise"]["se"],
                                 "rows_lost_won": [v.metrics["noise"].get("rows_lost"),
                                                   v.metrics["noise"].get("rows_won")],
                                 "sign_test_p": v.metrics["noise"].get("sign_test_p"),
                                 "corrections": v.metrics.get("corrections")}
                                for v in within],
        "old_rule_would_roll_back": sum(v.metrics["noise"]["diff"] > margin for v in judged),
        "unlearned_labels": status["model"]["unlearned_labels"],
        "learnable_vs_n_train": {"active_n_train": status["model"]["active"]["n_train"]},
    }


SCENARIOS = {"kill_replay": kill_replay, "kill_run": kill_run, "soak": soak, "gate": gate}
