"""Start-to-ready time and resident memory of `edge-plm run` (docs/design.md §5: <= 3 s with a warm
Numba cache).

Starts the real service (`edge-plm run --config ...`) with mock GPIO and a text source on stdin
(this machine has no microphone), waits for the systemd readiness message on a NOTIFY_SOCKET,
feeds utterances, then reads the process's peak resident set (VmHWM) before stopping it with
SIGTERM. A text source needs no recogniser, so no ASR is loaded (`pocketsphinx_loaded` in the
results says so); the memory of the whole loop with pocketsphinx is measured on a `replay` of the
demo (docs/benchmarks-log.md §5). The first run warms the Numba cache; the second is the one reported as
"warm".

Usage (from the repo root): python3 benchmarks/bench_service.py [--lines 20]
Writes benchmarks/results/service.json.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchinfo import machine  # noqa: E402
from notified_service import notified_service, text_service_config, wait_for_interactions  # noqa: E402

PHRASES = ["turn on the light", "what time is it", "switch the lamp off", "lights on please",
           "play some music", "turn off the light"]


def run_once(state: Path, lines: int) -> dict:
    config = text_service_config(state / "config.toml", state, '[asr]\nbackend = "pocketsphinx"\n')
    t0 = time.perf_counter()
    with notified_service(config, state / "notify.sock", timeout_s=300,
                          stdout=subprocess.DEVNULL) as (proc, sock):
        msg = sock.recv(64)
        ready_s = time.perf_counter() - t0
        if msg != b"READY=1":
            raise RuntimeError(f"unexpected notify message {msg!r}")
        proc.stdin.write("".join(PHRASES[i % len(PHRASES)] + "\n" for i in range(lines)))
        proc.stdin.flush()
        wait_for_interactions(state / "edge-plm.db", lines, timeout_s=300)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        fields = {l.split(":")[0]: l.split(":")[1].strip() for l in status.splitlines() if ":" in l}
        modules = Path(f"/proc/{proc.pid}/maps").read_text()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    return {"ready_s": round(ready_s, 2), "peak_rss_mb": int(fields["VmHWM"].split()[0]) / 1024,
            "rss_mb": int(fields["VmRSS"].split()[0]) / 1024, "pocketsphinx_loaded": "pocketsphinx" in modules,
            "returncode": proc.returncode, "interactions": lines}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=20)
    args = ap.parse_args()
    runs = []
    for label in ("cold (first start, Numba cache may compile)", "warm"):
        with tempfile.TemporaryDirectory() as tmp:
            r = run_once(Path(tmp), args.lines)
            runs.append({"run": label, **r})
    print("| run | start to READY s | peak RSS MB | pocketsphinx loaded |\n|---|---|---|---|")
    for r in runs:
        print(f"| {r['run']} | {r['ready_s']} | {r['peak_rss_mb']:.0f} | {r['pocketsphinx_loaded']} |")
    out = Path(__file__).resolve().parent / "results" / "service.json"
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "command": "python3 " + " ".join(sys.argv), "machine": machine(),
                               "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
