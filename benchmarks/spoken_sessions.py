#!/usr/bin/env python3
"""Spoken sessions to measure the ear on: households each spoken by one voice, households and
crowds with voices mixed, flite and espeak-ng, commands among chatter (benchmarks/bench_ear.py
replays them through the real loop).

Two kinds of session, about 120 utterances each, about 40 % of them commands:

* ``household-*``: one home. It says its own few phrasings again and again: 3 ways of saying
  ON and 3 of saying OFF, and a pool of 8 chatter lines, half of each drawn from
  ../shared/data/switch-dev-test.jsonl (commands about its kind of device where there are some)
  and half from the phrasings written below (natural home wording about the household's own
  device: a lamp, the lights, a plug). A command changes the
  device's state (ON when it is off, OFF when it is on) after 0-3 chatter lines, as
  benchmarks/household_sessions.py does. ``household-<voice>`` is spoken by that one voice;
  ``household-mixed-*`` by several (a home with several people).
* ``crowd-*``: every usable command of switch-dev-test (again, in another order, until about
  40 % of the session are commands) among its chatter lines, each line as written, in voices
  taken in turn.

Hygiene: no line of ../shared/data/switch-dev-train.jsonl, models/data/*.jsonl or
benchmarks/data/households/ is used (the ear's language model and the starting model are built
from those): a switch-dev-test line or a phrasing of ours that is one of them (compared after
`edge_plm.switch.tokenizer.normalize`) is left out. Deterministic: the same seed and data give
the same files, byte for byte.

Output: benchmarks/data/spoken/<session>.jsonl, one line per utterance
``{"text": clean text, "label": "ON"|"OFF"|"NOOP", "voice": "flite:slt"|"espeak:en-gb:175"}``
(committed), and with ``--wav`` the WAVs (benchmarks/spoken_answers.py `speech_wav`: flite via
scripts/synth_speech.py, espeak-ng at its rate, 16 kHz) plus one replay file per session,
``<wav-dir>/<session>.replay.jsonl`` with ``{"audio": WAV, "text", "label", "voice"}`` lines that
``edge-plm replay`` and `edge_plm.loop.replay.read_session` accept (not committed).

    python3 benchmarks/spoken_sessions.py [--seed 45] [--data ../shared/data]
    python3 benchmarks/spoken_sessions.py --wav [--wav-dir /tmp/edge-plm-spoken] [--only household]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from edge_plm.switch.tokenizer import normalize  # noqa: E402

OUT = REPO / "benchmarks" / "data" / "spoken"
WAV_DIR = Path(tempfile.gettempdir()) / "edge-plm-spoken"
LINES = 120
COMMAND_SHARE = 0.4
SEED = 45

FLITE = ("flite:slt", "flite:rms", "flite:awb", "flite:kal16")
ESPEAK = ("espeak:en-us:160", "espeak:en-gb:175", "espeak:en-us+f3:190",
          "espeak:en-gb-scotland:150", "espeak:en-us+m3:205")

# Phrasings written for these sessions (not taken from any corpus): how a home says it.
# {d} is the household's device.
OWN_ON = ("{d} on please", "switch the {d} on", "could you put the {d} on", "can I have the {d} on",
          "{d} on", "turn the {d} on for me", "put the {d} on would you", "switch on the {d} please",
          "could you turn on the {d}", "I'd like the {d} on")
OWN_OFF = ("kill the {d}", "{d} off please", "could you switch off the {d}", "shut the {d} off",
           "{d} off", "turn the {d} off for me", "put the {d} off would you", "switch off the {d} please",
           "can you turn off the {d} now", "turn off the {d} please")
OWN_CHATTER = ("what's the weather tomorrow", "remind me to call mum", "I think the light in the kitchen was nicer",
               "is it going to rain this afternoon", "what time is it", "set a timer for ten minutes",
               "did anyone feed the cat", "the lamp in the hall is broken again", "I left my keys on the table",
               "turn the music down a bit", "add milk to the shopping list", "how long do I boil an egg",
               "tell me a joke", "the fan is making a funny noise", "what's on tv tonight",
               "we need new light bulbs", "who turned the heating up", "I'm going to bed now",
               "dinner is ready", "play some jazz", "what was the score of the match",
               "switching the kettle on was a good idea", "did you leave the garage door open",
               "the lights at the shop were off all day", "my phone is on the sofa", "good morning everyone")
# a household's device -> the words a test line about it has (the test lines it draws on)
DEVICES = {"light": ("light", "lamp"), "lights": ("light", "lamp"), "lamp": ("light", "lamp"),
           "kitchen light": ("light", "lamp"), "bedroom lamp": ("light", "lamp"),
           "plug": ("plug", "socket", "wemo"), "socket": ("plug", "socket", "wemo")}


def session_plan() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each session's name -> (kind, its voices)."""
    plan: dict[str, tuple[str, tuple[str, ...]]] = {}
    for v in FLITE + ESPEAK:
        plan["household-" + v.replace(":", "-").replace("+", "-")] = ("household", (v,))
    plan["household-mixed-flite"] = ("household", FLITE)
    plan["household-mixed-espeak"] = ("household", ESPEAK)
    plan["household-mixed-both"] = ("household", FLITE[:2] + ESPEAK[:2])
    plan["crowd-flite"] = ("crowd", FLITE)
    plan["crowd-espeak"] = ("crowd", ESPEAK)
    plan["crowd-mixed"] = ("crowd", tuple(v for pair in zip(FLITE, ESPEAK) for v in pair))
    return plan


def read_rows(path: Path) -> list[dict]:
    """The JSON lines of `path` (ValueError naming the file when it is missing or bad)."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    rows = []
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{no}: not JSON ({exc.msg})") from None
    return rows


def forbidden_texts(train: Path) -> set[str]:
    """The normalised texts no session may use: `train` (switch-dev-train), models/data/*.jsonl
    and benchmarks/data/households/*.jsonl (their text and clean text)."""
    files = [train, *sorted((REPO / "models" / "data").glob("*.jsonl")),
             *sorted((REPO / "benchmarks" / "data" / "households").glob("*.jsonl"))]
    out = set()
    for f in files:
        for row in read_rows(f):
            for key in ("text", "clean_text"):
                if isinstance(row.get(key), str):
                    out.add(normalize(row[key]))
    return out


def usable(test: list[dict], forbidden: set[str]) -> dict[str, list[str]]:
    """switch-dev-test's lines by label, each once, in file order, minus the forbidden ones."""
    out: dict[str, list[str]] = {"ON": [], "OFF": [], "NOOP": []}
    for row in test:
        text = " ".join(str(row["text"]).split())
        if normalize(text) not in forbidden and text not in out[row["label"]]:
            out[row["label"]].append(text)
    return out


def _own(templates: tuple[str, ...], device: str, forbidden: set[str]) -> list[str]:
    lines = [t.format(d=device) for t in templates]
    return [t for t in lines if normalize(t) not in forbidden]


def household(rng: random.Random, pool: dict[str, list[str]], forbidden: set[str],
              voices: tuple[str, ...], lines: int = LINES) -> list[dict]:
    """One home: its 3 ON, 3 OFF and 8 chatter phrasings (half from the test lines, half ours),
    repeated; a command after 0-3 chatter lines, changing the device's state."""
    device = rng.choice(sorted(DEVICES))
    about = {lab: [t for t in pool[lab] if any(w in t.split() or w + "s" in t.split() for w in DEVICES[device])]
             or pool[lab] for lab in ("ON", "OFF")}  # test lines about its kind of device
    on = rng.sample(about["ON"], 1) + rng.sample(_own(OWN_ON, device, forbidden), 2)
    off = rng.sample(about["OFF"], 2) + rng.sample(_own(OWN_OFF, device, forbidden), 1)
    chatter = rng.sample(pool["NOOP"], 4) + rng.sample([t for t in OWN_CHATTER if normalize(t) not in forbidden], 4)
    out: list[dict] = []
    state_on = False
    while len(out) < lines:
        for _ in range(rng.choice((0, 1, 1, 2, 2, 3))):  # 1.5 chatter lines per command: 40 %
            out.append({"text": rng.choice(chatter), "label": "NOOP", "voice": rng.choice(voices)})
        wish = "OFF" if state_on else "ON"
        out.append({"text": rng.choice(off if state_on else on), "label": wish, "voice": rng.choice(voices)})
        state_on = not state_on
    return out[:lines]


def crowd(rng: random.Random, pool: dict[str, list[str]], voices: tuple[str, ...],
          lines: int = LINES) -> list[dict]:
    """Crowd-written lines as written: every usable command (more, shuffled again, up to 40 % of
    the lines) among chatter lines drawn without repeats; voices in turn."""
    commands = [(t, lab) for lab in ("ON", "OFF") for t in pool[lab]]
    n_cmd = round(COMMAND_SHARE * lines)
    picked = rng.sample(commands, len(commands))
    while len(picked) < n_cmd:
        picked += rng.sample(commands, min(len(commands), n_cmd - len(picked)))
    picked = picked[:n_cmd]
    chatter = [(t, "NOOP") for t in rng.sample(pool["NOOP"], lines - n_cmd)]
    kinds = ["cmd"] * n_cmd + ["chat"] * (lines - n_cmd)
    rng.shuffle(kinds)
    cmd, chat = iter(picked), iter(chatter)
    out = []
    for i, kind in enumerate(kinds):
        text, label = next(cmd) if kind == "cmd" else next(chat)
        out.append({"text": text, "label": label, "voice": voices[i % len(voices)]})
    return out


def build(test: list[dict], forbidden: set[str], seed: int = SEED, lines: int = LINES) -> dict[str, list[dict]]:
    """Every session of `session_plan`, from switch-dev-test's rows `test`; deterministic."""
    pool = usable(test, forbidden)
    out = {}
    for k, (name, (kind, voices)) in enumerate(session_plan().items()):
        rng = random.Random(f"{seed}:{k}:{name}")
        out[name] = (household(rng, pool, forbidden, voices, lines) if kind == "household"
                     else crowd(rng, pool, voices, lines))
    return out


def write_sessions(sessions: dict[str, list[dict]], out: Path = OUT) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, rows in sessions.items():
        path = out / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        paths.append(path)
    return paths


def replay_file(session: Path, wav_dir: Path = WAV_DIR) -> Path:
    """`session`'s replay file in `wav_dir`, its WAVs synthesised where missing: lines
    ``{"audio": "wav/<key>.wav", "text", "label", "voice"}`` (audio relative to the file)."""
    from spoken_answers import speech_wav  # noqa: PLC0415 - needs flite / espeak-ng only here

    rows = read_rows(session)
    wavs = wav_dir / "wav"
    out = []
    for no, row in enumerate(rows, 1):
        if not {"text", "label", "voice"} <= row.keys():
            raise ValueError(f"{session}:{no}: needs text, label and voice")
        wav = speech_wav(row["text"], row["voice"], wavs)
        out.append({"audio": str(wav.relative_to(wav_dir)), **row})
    path = wav_dir / f"{session.stem}.replay.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"),
                    help="folder with switch-dev-test.jsonl and switch-dev-train.jsonl")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--lines", type=int, default=LINES, help="utterances per session")
    ap.add_argument("--wav", action="store_true", help="also synthesise the WAVs and write the replay files")
    ap.add_argument("--wav-dir", default=str(WAV_DIR))
    ap.add_argument("--only", default="", help="comma-separated name prefixes (with --wav)")
    args = ap.parse_args(argv)
    if args.lines < 10:
        ap.error(f"--lines must be at least 10, got {args.lines}")
    data = Path(args.data)
    try:
        test = read_rows(data / "switch-dev-test.jsonl")
        forbidden = forbidden_texts(data / "switch-dev-train.jsonl")
    except ValueError as exc:
        ap.error(str(exc))
    sessions = build(test, forbidden, args.seed, args.lines)
    for path in write_sessions(sessions):
        rows = sessions[path.stem]
        cmds = sum(r["label"] != "NOOP" for r in rows)
        voices = sorted({r["voice"] for r in rows})
        print(f"{path.relative_to(REPO)}: {len(rows)} lines, {cmds} commands, voices {', '.join(voices)}", flush=True)
    if args.wav:
        prefixes = [p for p in args.only.split(",") if p]
        for path in sorted(OUT.glob("*.jsonl")):
            if prefixes and not any(path.stem.startswith(p) for p in prefixes):
                continue
            print(f"{replay_file(path, Path(args.wav_dir))}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
