#!/usr/bin/env python3
"""Move the test files into folders that mirror the package (tests/learning/, tests/loop/, ...).

Re-runnable: it moves only test files still directly under tests/ (e.g. ones another branch
added before a merge), so running it again after a merge files the newcomers and changes
nothing else. For each such `tests/test_*.py`:

  * its folder is the room named in ROOMS, else the package room (`edge_plm/<room>/`) it
    imports most (ties: the first imported), else it stays in tests/ (the hall: tests of the
    whole package, the test kit, the deployment, the hall's own modules);
  * it is moved with `git mv` (history follows);
  * its paths relative to itself keep pointing at the repository: ``Path(__file__).resolve()
    .parents[1]`` / ``.parent.parent`` become ``.parents[2]``;
  * every mention ``tests/<name>`` in the tracked text files (docs, comments, pyproject,
    scripts) becomes ``tests/<room>/<name>``.

The shared helpers (conftest.py, kit.py, _*_util.py) stay in tests/: pytest puts the
directory of the root conftest on sys.path, so ``from kit import ...`` works in every folder.

    python3 scripts/mirror_tests.py [--dry-run]
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
HALL = ""  # stays directly under tests/

#: the room of each test file (its subject); a file not listed goes by its imports
ROOMS = {
    "test_actions.py": HALL, "test_layout.py": HALL, "test_kit.py": HALL, "test_deploy.py": HALL,
    "test_quickstart.py": HALL, "test_ha_intents.py": HALL,
    "test_config_boundaries.py": "config", "test_config_validation.py": "config",
    "test_starting_model.py": "config",
    "test_voice_asr.py": "voice", "test_voice_audio.py": "voice", "test_voice_models.py": "voice",
    "test_voice_stream.py": "voice", "test_pcm_blocks.py": "voice", "test_talkback.py": "voice",
    "test_bounded_input.py": "voice",
    "test_device.py": "device", "test_devices_layer.py": "device", "test_relay_restore.py": "device",
    "test_policy.py": "decide",
    "test_addressing.py": "switch", "test_attention.py": "switch", "test_device_names.py": "switch",
    "test_owner.py": "switch", "test_predict_evidence.py": "switch", "test_relabel.py": "switch",
    "test_units.py": "switch", "test_forget_scrub.py": "switch",
    "test_bitcipher.py": "plm", "test_warmstart.py": "plm", "test_optim_checkpoint.py": "plm",
    "test_store.py": "store", "test_store_devices.py": "store", "test_store_queries.py": "store",
    "test_busy.py": "store",
    "test_learner.py": "learning", "test_learner_worker.py": "learning",
    "test_state_recovery.py": "learning", "test_checkpoint_trust.py": "learning",
    "test_own_files.py": "learning", "test_forget_privacy.py": "learning",
    "test_controller.py": "loop", "test_devices_loop.py": "loop", "test_honest_loop.py": "loop",
    "test_stops.py": "loop", "test_tryout.py": "loop", "test_run_notify.py": "loop",
    "test_mqtt_bridge.py": "bridge", "test_remote_label.py": "bridge",
    "test_doctor.py": "commands", "test_model_transfer.py": "commands",
    "test_switch_training.py": "commands",
    "test_cli_asr.py": "cli", "test_cli_data.py": "cli", "test_cli_devices.py": "cli",
    "test_cli_errors.py": "cli", "test_cli_help.py": "cli", "test_cli_model.py": "cli",
    "test_cli_run.py": "cli", "test_cli_version.py": "cli", "test_eval_cli.py": "cli",
    "test_kernels.py": "research", "test_lm_model.py": "research", "test_lm_trainer.py": "research",
    "test_saffu.py": "research",
    "test_bench_curves.py": "benchmarks", "test_bench_sessions.py": "benchmarks",
    "test_first_week.py": "benchmarks",
}

SELF_PATH = re.compile(r"Path\(__file__\)\.resolve\(\)\.(?:parents\[1\]|parent\.parent(?![\w.]))")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".txt", ".cfg", ".ini", ".yml", ".yaml"}


def package_rooms() -> set[str]:
    return {p.name for p in (REPO / "edge_plm").iterdir() if (p / "__init__.py").is_file()}


def room_by_imports(path: Path, rooms: set[str]) -> str:
    """The package room `path` imports most (ties: the first imported), else the hall."""
    seen: Counter[str] = Counter()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                 else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        for name in names:
            parts = name.split(".")
            if len(parts) > 1 and parts[0] == "edge_plm" and parts[1] in rooms:
                seen[parts[1]] += 1
    return seen.most_common(1)[0][0] if seen else HALL


def plan() -> dict[str, str]:
    """file name -> room, for the test files directly under tests/ that go into a folder."""
    rooms = package_rooms()
    out = {}
    for path in sorted(TESTS.glob("test_*.py")):
        room = ROOMS[path.name] if path.name in ROOMS else room_by_imports(path, rooms)
        if room:
            out[path.name] = room
    return out


def tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    return [REPO / n for n in names if Path(n).suffix in TEXT_SUFFIXES and (REPO / n).is_file()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="print the moves, change nothing")
    args = ap.parse_args(argv)
    moves = plan()
    for name, room in moves.items():
        print(f"tests/{name} -> tests/{room}/{name}")
    if args.dry_run or not moves:
        return 0
    for name, room in moves.items():
        (TESTS / room).mkdir(exist_ok=True)
        subprocess.run(["git", "mv", f"tests/{name}", f"tests/{room}/{name}"], cwd=REPO, check=True)
        moved = TESTS / room / name
        text = moved.read_text(encoding="utf-8")
        moved.write_text(SELF_PATH.sub("Path(__file__).resolve().parents[2]", text), encoding="utf-8")
    mention = re.compile(r"\btests/(" + "|".join(re.escape(n) for n in moves) + r")\b")
    for path in tracked_text_files():
        text = path.read_text(encoding="utf-8")
        new = mention.sub(lambda m: f"tests/{moves[m.group(1)]}/{m.group(1)}", text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"updated the mentions in {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
