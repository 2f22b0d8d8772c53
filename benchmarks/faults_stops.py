"""Fault-injection scenarios for clean stops, checked files and bounded input (issue 19), run
by `benchmarks/bench_faults.py --scenario NAME`.

- ``sigterm_run``: ``edge-plm run`` (text source on stdin fed a line every 80 ms, mock pins,
  0.05 s label windows, a version every 5 labels) on one state directory, sent SIGTERM at a
  random moment 0-10 s after its launch (start-up, ~3-5 s here, included), ``--sigterms-run``
  times. After each stop, without a restart: the exit code and how long the exit took;
  ``unlearned_labels`` as `edge-plm status` computes it (the active checkpoint against the
  database); phantom versions (logged as made but not a stored row with a file that matches
  its record) and candidate rows / temp files left; a SIGTERM that lands before the
  interpreter has run edge-plm's first line kills it (rc -15, empty log, nothing opened) and is
  counted apart; swallowed labels ("could not apply the
  resolution" in the log, or a label stored before the stop that changed); relay changes
  after the signal (a ``relay -> ON/OFF`` log line stamped more than 20 ms after it; the log's
  clock is this machine's).
- ``sigterm_replay``: ``edge-plm replay --json`` of 1,000 household text lines on one
  database, sent SIGTERM 0.5-8 s after its launch, ``--sigterms-replay`` times: the same
  checks, plus the JSON summary printed.
- ``swap``: a potato replay and an orange one (in this process, `build_replay`); the orange
  active checkpoint is copied over the potato active version's file. Then `model list
  --json`, `status --json`, a `replay` on the potato database (its log on stderr) and `status`
  again: refused (the replay runs on the previous good version) and reported in all three.
- ``long_wav``: a 590 s 44.1 kHz stereo 16-bit WAV (espeak-ng phrase + low noise, sox) through
  `edge-plm asr transcribe` and a one-line `edge-plm replay`, peak RSS by ``/usr/bin/time -v``,
  next to the same commands on the 3 s phrase alone (the process without the long audio).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from faults_state import CLI, ENV, ROOT, integrity, labels_of, text_lines

RELAY_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO edge_plm\.device\.relay: "
                        r"relay -> (ON|OFF)")
MADE = re.compile(r"model version (v\d+) active")
SWALLOWED = "could not apply the resolution"


def _log_time(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _after_stop(db: Path, ckdir: Path, before: dict[int, str], log: str, t_signal: float,
                settings) -> dict:
    """What one stop left, read without starting anything (as `edge-plm status` reads it)."""
    from edge_plm.learning import trust
    from edge_plm.learning.state import unlearned_in_active
    from edge_plm.store import ReplayStore

    if not db.exists():
        return {"db": False, "unlearned_labels": 0, "phantom_versions": [], "candidate_rows": 0,
                "tmp_files": 0, "labels_changed": 0, "swallowed": log.count(SWALLOWED),
                "relay_after_signal": _relay_after(log, t_signal), "integrity": "ok"}
    with ReplayStore(db, read_only=True) as store:
        unlearned = unlearned_in_active(store, settings.model.holdout_fraction)
        versions = {v.version: v for v in store.model_versions()}
    now = labels_of(db)
    good = {name for name, v in versions.items()
            if v.status != "candidate" and (not v.path or (Path(v.path).is_file()
                                                           and trust.file_problem(v) is None))}
    # logged as made but not stored with its file, or the active row without a good file
    phantom = set(MADE.findall(log)) - good
    phantom |= {n for n, v in versions.items() if v.status == "active" and n not in good}
    return {"db": True, "unlearned_labels": unlearned, "phantom_versions": sorted(phantom),
            "candidate_rows": sum(v.status == "candidate" for v in versions.values()),
            "tmp_files": len(list(ckdir.glob("*.tmp"))) if ckdir.exists() else 0,
            "labels_changed": sum(now.get(i) != y for i, y in before.items()),
            "swallowed": log.count(SWALLOWED), "relay_after_signal": _relay_after(log, t_signal),
            "integrity": integrity(db)}


def _relay_after(log: str, t_signal: float) -> int:
    return sum(1 for line in log.splitlines()
               if (m := RELAY_LINE.match(line)) and _log_time(m.group(1)) > t_signal + 0.02)


def _summary(records: list[dict]) -> dict:
    return {
        "stops": len(records),
        "exit_codes": sorted({r["rc"] for r in records}),
        "not_clean": sum(r["rc"] != 0 and not r.get("before_python") for r in records),
        # SIGTERM before the interpreter reached edge-plm's first line (its default action,
        # rc -15): nothing was opened, nothing written; no Python code can handle it sooner
        "killed_before_python_code": sum(bool(r.get("before_python")) for r in records),
        "during_start_up": sum(r["during_start_up"] for r in records),
        "exit_s_max": max(r["exit_s"] for r in records),
        "exit_s_median": sorted(r["exit_s"] for r in records)[len(records) // 2],
        "unlearned_labels_total": sum(r["unlearned_labels"] or 0 for r in records),
        "unlearned_unknown": sum(r["unlearned_labels"] is None for r in records),
        "phantom_versions": sum(len(r["phantom_versions"]) for r in records),
        "candidate_rows_or_tmp_files": sum(r["candidate_rows"] + r["tmp_files"] for r in records),
        "swallowed_labels": sum(r["swallowed"] + r["labels_changed"] for r in records),
        "relay_changes_after_signal": sum(r["relay_after_signal"] for r in records),
        "integrity_failures": sum(r["integrity"] != "ok" for r in records),
    }


def _verdict(s: dict) -> bool:
    return (s["not_clean"] == 0 and s["unlearned_labels_total"] == 0 and s["unlearned_unknown"] == 0
            and s["phantom_versions"] == 0 and s["swallowed_labels"] == 0
            and s["relay_changes_after_signal"] == 0 and s["integrity_failures"] == 0
            and s["candidate_rows_or_tmp_files"] == 0)


def _config(state: Path) -> Path:
    config = state.parent / "config.toml"
    config.write_text(f'[paths]\nstate_dir = "{state}"\n[audio]\nsource = "text"\n'
                      '[gpio]\npin_factory = "mock"\n[policy]\nask_window_s = 0.05\n'
                      'override_window_s = 0.05\n[model]\nversion_every = 5\n')
    return config


def _feed(proc: subprocess.Popen, rows: list[dict], start: int, stop: threading.Event) -> None:
    i = start
    while not stop.is_set():
        try:
            proc.stdin.write(rows[i % len(rows)]["text"] + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            return
        i += 1
        stop.wait(0.08)


def _one_run(config: Path, rows: list[dict], cursor: int, delay: float) -> dict:
    proc = subprocess.Popen([*CLI, "run", "--config", str(config)], cwd=ROOT, env=ENV,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    stop = threading.Event()
    feeder = threading.Thread(target=_feed, args=(proc, rows, cursor, stop), daemon=True)
    feeder.start()
    time.sleep(delay)
    t_signal = time.time()
    proc.send_signal(signal.SIGTERM)
    try:
        log, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        log, _ = proc.communicate()
    exit_s = time.time() - t_signal
    stop.set()
    feeder.join(timeout=2)
    return {"rc": proc.returncode, "exit_s": round(exit_s, 2), "log": log,
            "before_python": proc.returncode == -signal.SIGTERM and not log.strip(),
            "t_signal": t_signal, "during_start_up": "ready: listening" not in log}


def sigterm_run(args) -> dict:
    from edge_plm.config.settings import load

    rng = random.Random(args.seed + 19)
    rows = text_lines()
    work = Path(tempfile.mkdtemp(prefix="faults-sigterm-run-"))
    config = _config(work / "state")
    settings = load(config)
    db, ckdir = settings.paths.database_path(), settings.paths.checkpoints_path()
    records, cursor = [], 0
    for k in range(args.sigterms_run):
        before = labels_of(db) if db.exists() else {}
        delay = rng.uniform(0.0, 10.0)
        run = _one_run(config, rows, cursor, delay)
        cursor += int(delay / 0.08)
        rec = _after_stop(db, ckdir, before, run.pop("log"), run.pop("t_signal"), settings)
        rec.update(run, stop=k, after_s=round(delay, 2))
        records.append(rec)
        print(json.dumps(rec), file=sys.stderr)
    summary = _summary(records)
    return {"ok": _verdict(summary), "workdir": str(work), **summary,
            "labels_in_db_at_end": len(labels_of(db)) if db.exists() else 0, "runs": records}


def sigterm_replay(args) -> dict:
    from edge_plm.config.settings import Settings

    rng = random.Random(args.seed + 20)
    rows = text_lines()
    work = Path(tempfile.mkdtemp(prefix="faults-sigterm-replay-"))
    db, ckdir = work / "edge-plm.db", work / "edge-plm.checkpoints"  # the database's own folder
    records = []
    for k in range(args.sigterms_replay):
        part = [rows[(k * 350 + i) % len(rows)] for i in range(1000)]
        session = work / f"session-{k}.jsonl"
        session.write_text("".join(json.dumps(r) + "\n" for r in part))
        before = labels_of(db) if db.exists() else {}
        proc = subprocess.Popen([*CLI, "replay", str(session), "--db", str(db), "--json"],
                                cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        delay = rng.uniform(0.5, 8.0)
        time.sleep(delay)
        t_signal = time.time()
        finished = proc.poll() is not None
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        exit_s = time.time() - t_signal
        try:
            played = json.loads(out)["interactions"]
        except (json.JSONDecodeError, KeyError):
            played = None
        rec = _after_stop(db, ckdir, before, err, t_signal, Settings())
        rec.update(stop=k, rc=proc.returncode, exit_s=round(exit_s, 2), after_s=round(delay, 2),
                   had_finished=finished, lines_played=played,
                   during_start_up=played == 0, error_lines=err.count("error:"))
        records.append(rec)
        print(json.dumps(rec), file=sys.stderr)
    summary = _summary(records)
    summary["summary_printed"] = sum(r["lines_played"] is not None for r in records)
    ok = _verdict(summary) and summary["summary_printed"] == len(records)
    return {"ok": ok, "workdir": str(work), **summary, "runs": records}


def _replayed(work: Path, config: str, lines: int):
    from dataclasses import replace

    from edge_plm.decide.policy import Action
    from edge_plm.loop.replay import SessionLine, build_replay, run_session
    from edge_plm.config.settings import Settings

    s = Settings()
    s = replace(s, model=replace(s.model, config=config, start="empty", version_every=5))
    db = work / config / "edge-plm.db"
    rep = build_replay(s, db)
    try:
        run_session([SessionLine(Action(r["label"]), r["text"]) for r in text_lines()[:lines]],
                    rep.controller, rep.clock)
        rep.controller.stop()
    finally:
        rep.close()
    return db


def _cli_json(*args: str) -> dict | list:
    return json.loads(subprocess.run([*CLI, *args, "--json"], cwd=ROOT, env=ENV, check=True,
                                     capture_output=True, text=True).stdout)


def swap(args) -> dict:
    from edge_plm.store import ReplayStore

    work = Path(tempfile.mkdtemp(prefix="faults-swap-"))
    potato, orange = _replayed(work, "potato", 200), _replayed(work, "orange", 60)
    with ReplayStore(potato, read_only=True) as s:
        active = s.active_model_version()
    with ReplayStore(orange, read_only=True) as s:
        orange_file = s.active_model_version().path
    shutil.copyfile(orange_file, active.path)
    listed = next(v for v in _cli_json("model", "list", "--db", str(potato))
                  if v["version"] == active.version)
    before = _cli_json("status", "--db", str(potato))["model"]
    session = work / "more.jsonl"
    session.write_text("".join(json.dumps(r) + "\n" for r in text_lines()[200:240]))
    rep = subprocess.run([*CLI, "replay", str(session), "--db", str(potato), "--json"], cwd=ROOT,
                         env=ENV, capture_output=True, text=True)
    after = _cli_json("status", "--db", str(potato))["model"]
    with ReplayStore(potato, read_only=True) as s:
        swapped = next(v for v in s.model_versions() if v.version == active.version)
        used = s.active_model_version()
    out = {
        "swapped_version": active.version,
        "model_list": {"checkpoint_state": listed["checkpoint_state"],
                       "problem": listed["checkpoint_problem"]},
        "status_before_start": {"active_checkpoint": before["active_checkpoint"],
                                "unlearned_labels": before["unlearned_labels"]},
        "replay_rc": rep.returncode,
        "replay_log_says": [line for line in rep.stderr.splitlines() if active.version in line][:2],
        "after": {"swapped_status": swapped.status, "active_now": used.version,
                  "active_config": used.config, "status_damaged": after["damaged"],
                  "unlearned_labels": after["unlearned_labels"]},
    }
    out["ok"] = (listed["checkpoint_state"] == "damaged" and before["active_checkpoint"] == "damaged"
                 and rep.returncode == 0 and bool(out["replay_log_says"])
                 and swapped.status == "rolled_back" and used.config == "potato"
                 and [d["version"] for d in after["damaged"]] == [active.version]
                 and after["unlearned_labels"] == 0)
    return out


def _peak_rss_mb(cmd: list[str]) -> tuple[float, float, int]:
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], cwd=ROOT, env=ENV, capture_output=True,
                          text=True)
    kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", proc.stderr).group(1)
    seconds = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall.split(":"))))
    return round(kb / 1024, 1), round(seconds, 1), proc.returncode


def long_wav(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="faults-longwav-"))
    phrase, p44 = work / "phrase.wav", work / "p44.wav"
    subprocess.run(["espeak-ng", "-w", str(phrase), "turn on the light"], check=True)
    subprocess.run(["sox", str(phrase), "-r", "44100", "-c", "2", "-b", "16", str(p44)], check=True)
    length = float(subprocess.run(["soxi", "-D", str(p44)], capture_output=True, text=True,
                                  check=True).stdout)
    noise, long = work / "noise.wav", work / "long590.wav"
    subprocess.run(["sox", "-n", "-r", "44100", "-c", "2", "-b", "16", str(noise), "synth",
                    f"{590.0 - length:.3f}", "whitenoise", "vol", "0.01"], check=True)
    subprocess.run(["sox", str(p44), str(noise), str(long)], check=True)
    seconds = float(subprocess.run(["soxi", "-D", str(long)], capture_output=True, text=True,
                                   check=True).stdout)
    out: dict = {"wav": {"seconds": round(seconds, 1), "rate": 44100, "channels": 2, "bits": 16,
                         "bytes": long.stat().st_size}}
    for name, wav in (("long", long), ("short", p44)):
        session = work / f"{name}.jsonl"
        session.write_text(json.dumps({"audio": str(wav), "label": "ON"}) + "\n")
        for cmd, argv in (("asr_transcribe", ["asr", "transcribe", str(wav)]),
                          ("replay", ["replay", str(session), "--json"])):
            mb, wall, rc = _peak_rss_mb([*CLI, *argv])
            out.setdefault(cmd, {})[name] = {"peak_rss_mb": mb, "wall_s": wall, "rc": rc}
    for cmd in ("asr_transcribe", "replay"):
        out[cmd]["long_minus_short_mb"] = round(out[cmd]["long"]["peak_rss_mb"]
                                                - out[cmd]["short"]["peak_rss_mb"], 1)
    out["ok"] = all(out[c]["long"]["peak_rss_mb"] <= 300 and out[c]["long"]["rc"] == 0
                    for c in ("asr_transcribe", "replay"))
    return out


SCENARIOS = {"sigterm_run": sigterm_run, "sigterm_replay": sigterm_replay, "swap": swap,
             "long_wav": long_wav}
