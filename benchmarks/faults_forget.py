"""Forget means forgotten (issue 19), run by `benchmarks/bench_faults.py --scenario forget`.

``forget``: the household text sessions (``--soak-lines`` lines, 2,000 by default) with secret
utterances mixed in — every 40th line one of three secret words, labelled or not — are
replayed by the real `edge-plm replay` into a state dir (database + checkpoints), every
command's stderr (its log lines, what journald keeps of the service) going to one log file;
stdout is the answer the person asked for (`status` shows the last transcript) and is not
searched. Then, with the real CLI:

1. `forget` of the interactions that hold the first secret word; every file under the state
   dir and the log are searched for it; `status` must say ``unlearned_labels`` 0; then
   `model rollback` to every version `model list` shows with a file, each followed by the
   same search and a check that the active checkpoint holds no forgotten interaction;
2. `forget --all`; the same search for every secret word, and the rollbacks again.

Pass: 0 hits everywhere, every rollback accepted, no rollback revives a forgotten example,
``unlearned_labels`` 0 after each forget. Also measured: the wall time of each `forget`, and
(on a copy of the state dir, before step 1) what rewriting the kept checkpoints costs
(`forgetting.rewrite_kept`) against deleting them.

Writes benchmarks/results/faults-forget.json (through bench_faults.py).
"""

from __future__ import annotations

import json
import os
import shutil
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
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
       "PYTHONPATH": str(ROOT), "EDGE_PLM_CONFIG": os.devnull}
SECRETS = ("xylofrump", "quandoberry", "zwiblet")
PHRASINGS = ("my bank pin is {w} seven", "turn on the {w} light", "remind me to call {w}")


def session(n: int) -> list[dict]:
    """`n` household text lines with a secret utterance as every 40th line."""
    rows = []
    for f in sorted(HOUSEHOLDS.glob("household-text-*.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    out = []
    for i in range(n):
        if i % 40 == 39:
            k = i // 40
            word = SECRETS[k % len(SECRETS)]
            label = ("NOOP", "ON", None)[k // len(SECRETS) % 3]
            out.append({"text": PHRASINGS[k % len(PHRASINGS)].format(w=word), "label": label})
        else:
            out.append({"text": rows[i % len(rows)]["text"], "label": rows[i % len(rows)]["label"]})
    return out


class Device:
    """A state dir and the log of every command run on it."""

    def __init__(self, work: Path) -> None:
        self.state = work / "state"
        self.db = self.state / "edge-plm.db"
        self.log = work / "commands.log"

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        res = subprocess.run([*CLI, *args], env=ENV, capture_output=True, text=True, timeout=1800)
        with open(self.log, "a") as f:  # the log: what the commands log (stderr), as journald
            f.write(f"$ edge-plm {' '.join(args)}\n{res.stderr}")
        if check and res.returncode != 0:
            raise RuntimeError(f"edge-plm {' '.join(args)}: rc {res.returncode}: {res.stderr[-800:]}")
        return res

    def json(self, *args: str):
        return json.loads(self.cli(*args, "--db", str(self.db), "--json").stdout)

    def hits(self, words) -> dict[str, list[str]]:
        """Files under the state dir, and the log, whose bytes hold any of `words`."""
        found = {}
        for p in [*sorted(self.state.rglob("*")), self.log]:
            if p.is_file():
                data = p.read_bytes()
                held = [w for w in words if w.encode() in data]
                if held:
                    found[str(p)] = held
        return found

    def ids_with(self, word: str) -> list[int]:
        with sqlite3.connect(self.db) as conn:
            return [i for i, in conn.execute("SELECT id FROM interactions WHERE transcript LIKE ?",
                                              [f"%{word}%"])]

    def active_keys(self) -> set[int]:
        from edge_plm.switch.model import SwitchModel

        with sqlite3.connect(self.db) as conn:
            (path,), = conn.execute("SELECT path FROM model_versions WHERE status = 'active'")
        # stored relative to the database's folder (docs/deploy.md), or absolute
        return {int(i) for i, _ in SwitchModel.load(self.db.parent / path).meta.get("interaction_keys") or []}


def rewrite_cost(dev: Device, ids: list[int], work: Path) -> dict:
    """On a copy of the state dir: the time of `rewrite_kept` for `ids` (rows not deleted)
    against deleting the same files."""
    from edge_plm.learning import forgetting
    from edge_plm.store import ReplayStore

    copy = work / "copy"
    shutil.copytree(dev.state, copy)  # a copy is independent: its checkpoint paths are relative
    db = copy / "edge-plm.db"
    with ReplayStore(db) as store:
        home = store.checkpoints_home()
        active = store.active_model_version().version
        texts = forgetting.kept_texts(store, exclude=set(ids))
        t0 = time.perf_counter()
        done = forgetting.rewrite_kept(store, home, set(ids), texts, {active})
        rewrite_s = time.perf_counter() - t0
    files = sorted(home.glob("*.npz"))  # the same versions' files (a rewrite renames them)
    t0 = time.perf_counter()
    for f in files:
        f.unlink()
    remove_s = time.perf_counter() - t0
    n = len(done["rewritten"]) + len(done["clean"])
    shutil.rmtree(copy)
    return {"checkpoints": n, "rewritten": len(done["rewritten"]), "rewrite_s": round(rewrite_s, 2),
            "rewrite_s_per_checkpoint": round(rewrite_s / max(n, 1), 2),
            "remove_s_all_files": round(remove_s, 4)}


def rollbacks(dev: Device, words, forgotten: set[int]) -> dict:
    """`model rollback` to every version listed with a file; the search after each."""
    versions = [v["version"] for v in dev.json("model", "list") if v["checkpoint_exists"]]
    refused, hits, revived = [], {}, {}
    for v in versions:
        res = dev.cli("model", "rollback", v, "--db", str(dev.db), check=False)
        if res.returncode != 0:
            refused.append(f"{v}: {res.stderr.strip()}")
            continue
        found = dev.hits(words)
        if found:
            hits[v] = found
        back = dev.active_keys() & forgotten
        if back:
            revived[v] = len(back)
    return {"versions": versions, "refused": refused, "hits": hits, "revived": revived}


def forget(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="faults-forget-"))
    try:
        dev = Device(work)
        lines = session(args.soak_lines)
        path = work / "session.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in lines))
        t0 = time.perf_counter()
        dev.cli("replay", str(path), "--db", str(dev.db))
        replay_s = time.perf_counter() - t0
        before = dev.hits(SECRETS)
        first = dev.ids_with(SECRETS[0])
        cost = rewrite_cost(dev, first, work)

        t0 = time.perf_counter()
        out1 = dev.json("forget", *map(str, first), "--yes")
        step1 = {"ids": len(first), "forget_s": round(time.perf_counter() - t0, 2),
                 "checkpoints": out1["checkpoints"], "hits": dev.hits(SECRETS[:1]),
                 "unlearned_labels": dev.json("status")["model"]["unlearned_labels"]}
        step1["rollbacks"] = rollbacks(dev, SECRETS[:1], set(first))

        with sqlite3.connect(dev.db) as conn:
            every = {i for i, in conn.execute("SELECT id FROM interactions")}
        t0 = time.perf_counter()
        out2 = dev.cli("forget", "--all", "--yes", "--db", str(dev.db)).stdout
        step2 = {"ids": len(every), "forget_s": round(time.perf_counter() - t0, 2),
                 "output": out2.splitlines(), "hits": dev.hits(SECRETS),
                 "unlearned_labels": dev.json("status")["model"]["unlearned_labels"]}
        step2["rollbacks"] = rollbacks(dev, SECRETS, every | set(first))
        ok = (bool(before) and not step1["hits"] and not step2["hits"]
              and all(not s["rollbacks"][k] for s in (step1, step2)
                      for k in ("refused", "hits", "revived"))
              and step1["unlearned_labels"] == 0 and step2["unlearned_labels"] == 0
              and "backups:" in out2)
        return {"ok": ok, "lines": len(lines), "secret_lines": sum(
                    any(w in r["text"] for w in SECRETS) for r in lines),
                "replay_s": round(replay_s, 1), "files_with_secrets_before": len(before),
                "rewrite_vs_remove": cost, "forget_some": step1, "forget_all": step2,
                "forget_output_mentions_backups": "backups:" in out2}
    finally:
        shutil.rmtree(work, ignore_errors=True)


SCENARIOS = {"forget": forget}
