"""What recording the relay state (``gpio.relay_restore``) adds to a relay change.

Each toggle is `Devices.drive` on gpiozero's MockFactory, once without a state store (as
before) and once with the replay buffer recording it (one ``BEGIN IMMEDIATE`` ... ``COMMIT``
with ``synchronous = FULL``: one fsync of the WAL per change), alternating in one run so that
machine noise hits both alike. The database lives in ``--dir`` (default: a temporary directory
on the disk of the system's temp dir); an SD card is slower at fsync than this machine's disk.

Usage (repo root): python3 benchmarks/bench_relay_record.py [--toggles 400] [--dir DIR]
Prints the per-toggle median and p95 in ms of both, and the difference.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gpiozero.pins.mock import MockFactory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import header  # noqa: E402

from edge_plm.device import MAIN_RELAY  # noqa: E402
from edge_plm.device import Devices  # noqa: E402
from edge_plm.config.settings import GpioConfig  # noqa: E402
from edge_plm.store import ReplayStore  # noqa: E402


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(round(0.95 * len(values))) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--toggles", type=int, default=400)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    cfg = GpioConfig(pin_factory="mock", min_toggle_interval_ms=0)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = ReplayStore(Path(tmp) / "edge-plm.db")
        plain = Devices.from_config(cfg, factory=MockFactory(), install_exit_handlers=False)
        recorded = Devices.from_config(cfg, factory=MockFactory(), install_exit_handlers=False,
                                       state_store=store)
        times: dict[str, list[float]] = {"without record": [], "with record": []}
        for i in range(args.toggles):
            action = "ON" if i % 2 == 0 else "OFF"
            for name, devices in (("without record", plain), ("with record", recorded)):
                t0 = time.perf_counter()
                assert devices.drive(action, MAIN_RELAY)
                times[name].append((time.perf_counter() - t0) * 1000)
        assert store.relay_state("main") is (args.toggles % 2 == 1)
        plain.close()
        recorded.close()
        store.close()
    info = header()
    print(f"{info['date']}; {info['machine']}; {info['command']}\n")
    print("| relay change | median ms | p95 ms |\n|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.3f} | {p95(values):.3f} |")
    extra = statistics.median(times["with record"]) - statistics.median(times["without record"])
    print(f"\nthe record adds {extra:.3f} ms (median) to each of {args.toggles} changes")


if __name__ == "__main__":
    main()
