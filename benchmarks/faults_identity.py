"""Nothing lost to a renamed copy, an old import or a long sentence (issue 47), run by
`benchmarks/bench_faults.py --scenario NAME`. Every step is the real `edge-plm` in its own
process (`faults_files.Device`: text sessions, mock pins, a version every 40 labels).

- ``stem_copies``: `s.db` filled by a `replay` of 200 lines with made-up words, then copied in
  its folder with ``cp`` to `s.old` and `s.sqlite` (the same stem); each of the three is then
  used: `forget` of two ids, `model rebuild`, a `replay` of 40 more lines. Counted in each
  after every step: versions `model list` shows damaged, missing (a file that should be there
  and is not: neither pruned nor removed by forget) or whose file is not the one its record
  says. Pass: all 0, and the three use three different checkpoint folders.
- ``forget_under_run``: `edge-plm run` (text source, stdin held open) is up on a database
  whose kept checkpoints hold made-up words; a `forget` of their rows is killed (SIGKILL)
  after its first checkpoint rewrite. Pass: `status --json` shows what is owed
  (``model.forget_owed``) right after the kill, the running service finishes it (the journal
  empty, 0 files under the state dir holding a word) within 30 s, and it is still up.
- ``import_old_export``: the active version exported before a `forget` of the rows holding
  made-up words, then `model import --force` of that export. Pass: the import succeeds (or
  is refused with one `error:` line) and 0 files under the state dir hold a word afterwards,
  also after `forget --all`.
- ``long_first_label``: a new device from an empty model whose first label is a 100-word
  sentence (`replay`), then `edge-plm run` (empty input). Pass: the replay learns it (exit 0,
  `unlearned_labels` 0) or refuses it with one `error:` line, and `run` exits 0.

- ``rss_2000``: peak resident memory (``/usr/bin/time -v``) of `edge-plm run` (text source, 20
  lines on stdin, then end of input; and `run --audio` of two demo WAV files with pocketsphinx
  loaded) and of `forget -y` of 10 ids, on a database filled by a `replay` of 2,000 household
  lines (a version every 40 labels). Pass: all <= 300 MB.

Writes benchmarks/results/faults-<scenario>.json (through bench_faults.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from faults_files import (CLI, HOUSEHOLDS, SECRETS, STOPPED_FORGET, Device, _query,
                          household_lines)

ROOT = Path(__file__).resolve().parent.parent


def _problems(dev: Device) -> dict[str, list[str]]:
    """Versions `model list` shows damaged, or missing their file (not pruned or removed)."""
    listed = dev.json("model", "list")
    return {"damaged": dev.damaged(),
            "missing": [d["version"] for d in listed
                        if d["checkpoint_state"] == "missing" and not d.get("pruned")
                        and not d.get("forget_removed")]}


def _folder(dev: Device) -> str | None:
    rows = _query(dev.db, "SELECT value FROM meta WHERE key = 'checkpoints_folder'")
    return rows[0][0] if rows else None


def _secret_ids(dev: Device) -> list[int]:
    likes = " OR ".join("transcript LIKE ?" for _ in SECRETS)
    return [i for i, in _query(dev.db, f"SELECT id FROM interactions WHERE {likes}",
                               [f"%{w}%" for w in SECRETS])]


def stem_copies(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="faults-stem-"))
    try:
        folder = work / "state"
        s = Device(folder, "s.db")
        s.replay(household_lines(200, secrets=True))
        devices = {"s.db": s}
        for name in ("s.old", "s.sqlite"):
            shutil.copyfile(s.db, folder / name)
            devices[name] = Device(folder, name)
        steps: list[dict] = []
        more = household_lines(240)[200:]
        for name, dev in devices.items():
            dev.json("forget", "5", "6", "--yes")
            steps.append({"after": f"forget in {name}", **{n: _problems(d) for n, d in devices.items()}})
            dev.json("model", "rebuild")
            steps.append({"after": f"rebuild of {name}", **{n: _problems(d) for n, d in devices.items()}})
            dev.replay(more, name="more.jsonl")
            steps.append({"after": f"replay into {name}", **{n: _problems(d) for n, d in devices.items()}})
        folders = {n: _folder(d) for n, d in devices.items()}
        bad = sum(len(p[k]) for st in steps for n, p in st.items() if n != "after" for k in p)
        return {"steps": steps, "folders": folders, "damaged_or_missing": bad,
                "ok": bad == 0 and len(set(folders.values())) == len(folders)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def forget_under_run(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="faults-owed-"))
    service = None
    try:
        dev = Device(work / "state")
        dev.replay(household_lines(200, secrets=True))
        for _ in range(2):
            dev.json("model", "rebuild")  # more kept checkpoints holding the words
        ids = _secret_ids(dev)
        service = subprocess.Popen([*CLI, "run", "--config", str(dev.config)], env=dev.env,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, cwd=ROOT)
        time.sleep(8)  # started (the model loaded)
        marker = work / "marker"
        forget = subprocess.Popen([sys.executable, "-c", STOPPED_FORGET, "1", str(marker), "forget",
                                   *map(str, ids), "--yes", "--db", str(dev.db)], env=dev.env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        deadline = time.monotonic() + 600
        while not marker.exists() and forget.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        forget.send_signal(signal.SIGKILL)
        forget.wait()
        killed_at = time.monotonic()
        owed = dev.json("status")["model"]["forget_owed"]
        finished_s = None
        while time.monotonic() - killed_at < 30:
            if not dev.json("status")["model"]["forget_owed"]["versions"]:
                finished_s = round(time.monotonic() - killed_at, 1)
                break
            time.sleep(0.5)
        up = service.poll() is None
        hits = dev.hits(SECRETS)
        return {"forgotten_ids": len(ids), "owed_after_kill": owed, "finished_after_s": finished_s,
                "service_up": up, "files_with_words": hits, "problems": _problems(dev),
                "ok": bool(owed["versions"]) and finished_s is not None and up and not hits}
    finally:
        if service is not None and service.poll() is None:
            service.send_signal(signal.SIGTERM)
            try:
                service.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                service.kill()
        shutil.rmtree(work, ignore_errors=True)


def import_old_export(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="faults-import-"))
    try:
        dev = Device(work / "state")
        dev.replay(household_lines(200, secrets=True))
        (active,), = _query(dev.db, "SELECT version FROM model_versions WHERE status = 'active'")
        export = work / "old.npz"
        dev.cli("model", "export", active, str(export))
        held_words = any(w.encode() in export.read_bytes() for w in SECRETS)
        dev.json("forget", *map(str, _secret_ids(dev)), "--yes")
        res = dev.cli("model", "import", str(export), "--force", "--json", check=False)
        lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
        after_import = dev.hits(SECRETS)
        dev.json("forget", "--all", "--yes")
        after_all = dev.hits(SECRETS)
        clean = res.returncode == 0 or (len(lines) == 1 and "Traceback" not in res.stderr)
        return {"export_held_words": held_words, "import_exit": res.returncode,
                "import": json.loads(res.stdout) if res.returncode == 0 else lines,
                "files_with_words_after_import": after_import,
                "files_with_words_after_forget_all": after_all, "problems": _problems(dev),
                "ok": held_words and clean and not after_import and not after_all}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def long_first_label(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="faults-long-"))
    try:
        dev = Device(work / "state")
        dev.config.write_text(dev.config.read_text().replace("[model]\n", '[model]\nstart = "empty"\n'))
        words = ("please could you be so kind as to turn on the lamp in the living room because "
                 "it is getting dark and I cannot see a thing while reading my book").split()
        text = " ".join((words * 5)[:100])
        session = work / "long.jsonl"
        session.write_text(json.dumps({"text": text, "label": "ON"}) + "\n"
                           + json.dumps({"text": "lamp off", "label": "OFF"}) + "\n")
        rep = dev.cli("replay", str(session), "--config", str(dev.config), "--json", check=False)
        errors = [ln for ln in rep.stderr.splitlines() if ln.startswith("error:")]
        unlearned = dev.json("status")["model"]["unlearned_labels"]
        run = dev.cli("run", "--config", str(dev.config), db=False, check=False, stdin="")
        learned = rep.returncode == 0 and not errors and unlearned == 0
        refused = rep.returncode != 0 and len(errors) == 1 and "Traceback" not in rep.stderr
        return {"words": 100, "chars": len(text), "replay_exit": rep.returncode,
                "replay_errors": errors, "unlearned_labels": unlearned, "run_exit": run.returncode,
                "run_errors": [ln for ln in run.stderr.splitlines() if ln.startswith("error:")],
                "ok": (learned or refused) and run.returncode == 0}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _peak_mb(cmd: list[str], env: dict, stdin: Path | None = None) -> tuple[float, int]:
    """(peak resident set in MB, exit code) of `cmd`, from ``/usr/bin/time -v``."""
    with (stdin.open() if stdin else open(os.devnull)) as f:
        proc = subprocess.run(["/usr/bin/time", "-v", *cmd], stdin=f, env=env, capture_output=True,
                              text=True, cwd=ROOT)
    kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))
    return round(kb / 1024, 1), proc.returncode


def rss_2000(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="faults-rss-"))
    try:
        dev = Device(work / "state")
        t0 = time.perf_counter()
        rows = []
        for f in sorted(HOUSEHOLDS.glob("household-text-*.jsonl")):
            rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        many = [{"text": rows[i % len(rows)]["text"], "label": rows[i % len(rows)]["label"]}
                for i in range(2000)]  # the household lines, again from the start when done
        filled = dev.replay(many)
        fill_s = round(time.perf_counter() - t0, 1)
        feed = work / "lines.txt"
        feed.write_text("".join(r["text"] + "\n" for r in household_lines(20)))
        run_mb, run_rc = _peak_mb([*CLI, "run", "--config", str(dev.config)], dev.env, feed)
        # the service with its recogniser (pocketsphinx) loaded: two demo WAV files
        dev.config.write_text(dev.config.read_text() + '[asr]\nbackend = "pocketsphinx"\n')
        wavs = sorted((ROOT / "edge_plm" / "data" / "demo").glob("lights-*.wav"))[:2]
        ps_mb, ps_rc = _peak_mb([*CLI, "run", "--config", str(dev.config), "--gap", "0.5",
                                 "--audio", *map(str, wavs)], dev.env)
        ids = [str(i) for i, in _query(dev.db, "SELECT id FROM interactions WHERE label IS NOT NULL "
                                               "ORDER BY id LIMIT 10")]
        forget_mb, forget_rc = _peak_mb([*CLI, "forget", "-y", *ids, "--db", str(dev.db)], dev.env)
        versions = len(_query(dev.db, "SELECT version FROM model_versions"))
        return {"interactions": filled["interactions"], "fill_s": fill_s, "versions": versions,
                "run": {"peak_rss_mb": run_mb, "rc": run_rc},
                "run_pocketsphinx": {"peak_rss_mb": ps_mb, "rc": ps_rc, "wavs": len(wavs)},
                "forget": {"peak_rss_mb": forget_mb, "rc": forget_rc},
                "ok": (run_rc == 0 and ps_rc == 0 and forget_rc == 0
                       and max(run_mb, ps_mb, forget_mb) <= 300)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


SCENARIOS = {"stem_copies": stem_copies, "forget_under_run": forget_under_run,
             "import_old_export": import_old_export, "long_first_label": long_first_label,
             "rss_2000": rss_2000}
