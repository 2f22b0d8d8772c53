"""Issue 47, item 15: Ctrl-C pressed again while `forget` says what it did still ends it with
exit 130 and its summary (not by the signal, not with the summary cut off)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

AGAIN_AND_AGAIN = """
import os, signal, sys, time
from edge_plm.learning import forgetting
from edge_plm.store import ReplayStore
pressed = []
def hook(version):  # the first Ctrl-C, after the first checkpoint rewrite
    pressed.append(version)
    os.kill(os.getpid(), signal.SIGINT)
forgetting.after_rewrite = hook
real = ReplayStore.owed_rewrites
def owed(self):  # the person presses twice more while the command reports
    if pressed:
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    return real(self)
ReplayStore.owed_rewrites = owed
from edge_plm.cli import main
sys.argv = ["edge-plm"] + sys.argv[1:]
main()
"""


def test_three_ctrl_c_during_forget_exit_130_with_the_summary(db):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for _ in range(2):  # older checkpoints to rewrite
        assert subprocess.run([sys.executable, "-m", "edge_plm.cli", "model", "rebuild", "--db", str(db)],
                              env=env, capture_output=True, timeout=600).returncode == 0
    p = subprocess.run([sys.executable, "-c", AGAIN_AND_AGAIN, "forget", "1", "2", "3", "--yes",
                        "--db", str(db)], env=env, capture_output=True, text=True, timeout=600,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert p.returncode == 130, (p.returncode, p.stderr)
    assert "interrupted: the interactions are forgotten" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
