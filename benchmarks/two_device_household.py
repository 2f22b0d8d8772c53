#!/usr/bin/env python3
"""A two-device household from the SLURP-derived switch-dev data: the lights and a smart plug
(issue 25's household, configured only by names and aliases), replayed through `edge-plm replay`
from the configured starting model, before and after the household's own labels.

Devices (a config written to the work directory): `light` (aliases lights, lamp) and `plug`
(aliases socket, outlet, smart plug). A line's device comes from its SLURP intent: iot_hue_* ->
light, iot_wemo_* and wemo_* -> plug (ON / OFF lines; NOOP lines name none). (Until 2026-12-02 the
one test line filed "wemo_off", "turn off the socket", went to the light, and acting on the plug
counted as a wrong-device action.)

  before: switch-dev-test (283 lines, 43 commands; none in the shipped model) on a new database;
  after:  switch-dev-train (425 lines; the household's labels) on another new database, then
          switch-dev-test on that same database.

Each replay is prequential (the device learns as it goes), as on a device. Reports acted right
per command, wrong actions, actions on the wrong device and asks at chatter for the test session.

--splits N replays N more households as well: switch-dev's two files pooled (708 lines) and cut
as `split_curves.py` cuts them (split s: ``numpy.random.default_rng(100 + s)``'s permutation,
425 lines of labels in that order, 283 to test), and adds their sums. One test session holds 43
commands, so one command is 2.3 points; six more hold about 260. The shipped model was built
with switch-dev-train, so measure the splits from a starting model built without it (models/README.md).

    python3 benchmarks/two_device_household.py [--data ../shared/data] [--work /tmp/two-devices]
        [--set model.start=empty] [--splits 6]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import DEFAULT_DATA, describe, header, markdown_table, write_result  # noqa: E402
from split_curves import pooled_rows, splits  # noqa: E402

CONFIG = '''[[devices]]
name = "light"
aliases = ["lights", "lamp"]
relay_pin = 17
switch_pin = 27

[[devices]]
name = "plug"
aliases = ["socket", "outlet", "smart plug"]
relay_pin = 23
switch_pin = 24
'''


def household_row(r: dict) -> dict:
    row = {"text": r["text"], "label": r["label"]}
    if r["label"] != "NOOP":
        row["device"] = "plug" if "wemo" in r.get("intent", "") else "light"
    return row


def household_lines(src: Path | list[dict], dst: Path) -> None:
    rows = src if isinstance(src, list) else [json.loads(line) for line in open(src, encoding="utf-8")]
    with open(dst, "w", encoding="utf-8") as out:
        for r in rows:
            out.write(json.dumps(household_row(r)) + "\n")


def replay(session: Path, db: Path, config: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "edge_plm.cli", "replay", str(session), "--db", str(db),
                          "--config", str(config), "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def asks_at_chatter(session: Path, db: Path) -> int:
    """The session's NOOP lines some device asked about, read from the replay's stored rows (the
    session's lines are the database's last interactions, in order; the replay's per-device
    ``asked`` counts chatter asks too, so it cannot tell them from asks at commands)."""
    labels = [json.loads(line)["label"] for line in open(session, encoding="utf-8")]
    with sqlite3.connect(db) as con:
        ids = [i for (i,) in con.execute("SELECT id FROM interactions ORDER BY id DESC LIMIT ?", (len(labels),))]
        asked = {i for (i,) in con.execute("SELECT DISTINCT interaction_id FROM interaction_devices "
                                          "WHERE decision = 'ask'")}
    if len(ids) != len(labels):
        raise SystemExit(f"{db}: {len(ids)} stored interactions for a session of {len(labels)} lines")
    return sum(1 for i, label in zip(reversed(ids), labels) if label == "NOOP" and i in asked)


def summary(r: dict, session: Path, db: Path) -> dict:
    commands = sum(d["commands"] for d in r["devices"].values())
    right = sum(d["acted_right"] for d in r["devices"].values())
    chatter = sum(1 for line in open(session, encoding="utf-8") if json.loads(line)["label"] == "NOOP")
    return {"commands": commands, "acted_right": right, "acted_right_share": right / max(commands, 1),
            "acted": r["acted"], "acted_wrong": r["acted_wrong"], "acted_wrong_device": r["acted_wrong_device"],
            "asked": r["asked"], "asked_at_chatter": asks_at_chatter(session, db), "chatter": chatter,
            "missed": r["missed"], "devices": r["devices"]}


def household(work: Path, config: Path, stream_src, test_src) -> tuple[dict, dict, int]:
    """One household: its test session on a new database (before), then its labels and the
    test session on another (after)."""
    work.mkdir(parents=True, exist_ok=True, mode=0o700)
    stream, test = work / "stream.jsonl", work / "test.jsonl"
    household_lines(stream_src, stream)
    household_lines(test_src, test)
    for db in work.glob("*.db*"):
        db.unlink()
    before = summary(replay(test, work / "before.db", config), test, work / "before.db")
    learned = replay(stream, work / "house.db", config)
    after = summary(replay(test, work / "house.db", config), test, work / "house.db")
    return before, after, learned["labels"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="a config line added under its [section] (e.g. model.start=empty)")
    ap.add_argument("--splits", type=int, default=0, help="also replay this many split households")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="two-devices-"))
    work.mkdir(parents=True, exist_ok=True, mode=0o700)
    extra = {}
    for item in args.set:
        key, _, value = item.partition("=")
        section, _, name = key.partition(".")
        extra.setdefault(section, []).append(f"{name} = {json.dumps(value)}")
    config = work / "house.toml"
    config.write_text("".join(f"[{s}]\n" + "\n".join(v) + "\n\n" for s, v in extra.items()) + CONFIG)
    households = [(args.data / "switch-dev-train.jsonl", args.data / "switch-dev-test.jsonl")]
    households += splits(pooled_rows(args.data, asr=False), args.splits)
    results = [household(work / (f"split{i - 1}" if i else "."), config, stream, test)
               for i, (stream, test) in enumerate(households)]
    before, after, labels = results[0]
    payload = header()
    payload.update({"config": CONFIG, "overrides": args.set, "before": before, "after": after,
                    "household_labels": labels})
    if args.splits:
        payload["splits"] = [{"before": b, "after": a, "household_labels": n} for b, a, n in results[1:]]
    tag = "".join(c if c.isalnum() else "-" for c in "-".join(args.set))
    path = write_result("two-device-household" + (f"-{tag}" if tag else ""), payload)
    print(describe(payload))
    rows = [[name, f"{r['acted_right']}/{r['commands']} ({100 * r['acted_right_share']:.0f} %)",
             f"{r['acted_wrong']}/{r['acted']}", r["acted_wrong_device"],
             f"{r['asked_at_chatter']}/{r['chatter']}", r["missed"]]
            for name, r in (("before the household's labels", before),
                            (f"after its {labels} labels", after))]
    if args.splits:
        total = {k: [sum(r[k][key] for r in payload["splits"]) for key in ("acted_right", "commands",
                                                                            "acted_wrong", "acted",
                                                                            "acted_wrong_device",
                                                                            "asked_at_chatter", "chatter",
                                                                            "missed")]
                 for k in ("before", "after")}
        for name, (right, commands, wrong, acted, device, chatter_asks, chatter, missed) in (
                (f"{args.splits} splits, before their labels", total["before"]),
                (f"{args.splits} splits, after their labels", total["after"])):
            rows.append([name, f"{right}/{commands} ({100 * right / max(commands, 1):.0f} %)", f"{wrong}/{acted}",
                         device, f"{chatter_asks}/{chatter}", missed])
    print(markdown_table(["test session replayed", "commands acted right", "wrong / actions",
                          "on the wrong device", "asks at chatter", "missed"], rows))
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
