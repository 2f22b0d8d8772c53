"""Shared bits of the PLM benchmarks: one-core pinning, machine/command/date record, data
loading, markdown tables. Import ``pin_one_core()`` *before* numpy/numba when single-core
numbers are wanted (the BLAS/Numba thread pools read the environment at import)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
RESULTS = REPO / "benchmarks" / "results"
THREAD_VARS = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


OUTSIDE = "<outside>"  # stands for the folder of a path outside the repository


def shown(path: str | Path) -> str:
    """`path` as a results file records it: relative to the repository root; a path outside the
    repository (the data folder, a work folder) as ``<outside>/`` and its last component. Never
    a path of the machine that ran it."""
    rel = os.path.relpath(Path(path).resolve(), REPO)
    return f"{OUTSIDE}/{Path(rel).name}" if rel == ".." or rel.startswith(".." + os.sep) else rel


def pin_one_core() -> None:
    for var in THREAD_VARS:
        os.environ[var] = "1"
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[0]})


def machine() -> dict:
    info = {"python": platform.python_version(), "platform": platform.platform()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        info["cpu_model"] = fields.get("Model name", "?")
        info["cpus"] = int(fields.get("CPU(s)", 0) or 0)
        info["cores_per_socket"] = int(fields.get("Core(s) per socket", 0) or 0)
        info["threads_per_core"] = int(fields.get("Thread(s) per core", 0) or 0)
    except (OSError, subprocess.CalledProcessError, ValueError):
        info["cpu_model"] = platform.processor() or "?"
        info["cpus"] = os.cpu_count()
    if hasattr(os, "sched_getaffinity"):
        info["affinity"] = sorted(os.sched_getaffinity(0))
    info["threads_env"] = {v: os.environ.get(v) for v in THREAD_VARS}
    try:
        import numba
        import numpy

        info["numpy"], info["numba"] = numpy.__version__, numba.__version__
    except ImportError:
        pass
    try:
        info["git_commit"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                            capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "edge_plm"],
                               capture_output=True, text=True, check=True).stdout.strip()
        info["edge_plm_dirty"] = bool(dirty)
        if dirty:  # identify the uncommitted state of the package the numbers were measured on
            diff = subprocess.run(["git", "-C", str(REPO), "diff", "HEAD", "--", "edge_plm"],
                                  capture_output=True, check=True).stdout
            info["edge_plm_diff_sha256"] = hashlib.sha256(diff).hexdigest()[:16]
    except (OSError, subprocess.CalledProcessError):
        pass
    return info


def _shown_arg(arg: str) -> str:
    """A command-line argument as a results file records it: a path (or the path of a
    ``--opt=PATH``) that is absolute or leaves the working folder as `shown`, anything else as
    given."""
    opt, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
    if os.path.isabs(value) or value == ".." or value.startswith(".." + os.sep):
        value = shown(value)
    return f"{opt}{eq}{value}"


def header() -> dict:
    return {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(["python3", *(_shown_arg(a) for a in sys.argv)]), "machine": machine()}


def write_result(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def markdown_table(headers: list[str], rows: list[list]) -> str:
    def fmt(x):
        return f"{x:.3f}" if isinstance(x, float) else str(x)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def describe(payload: dict) -> str:
    m = payload["machine"]
    return (f"{payload['date']} · {m.get('cpu_model')} ({m.get('cpus')} CPUs, "
            f"{m.get('cores_per_socket')} cores/socket) · commit {m.get('git_commit', '?')}"
            f"{' + uncommitted edge_plm changes (diff ' + m.get('edge_plm_diff_sha256', '?') + ')' if m.get('edge_plm_dirty') else ''}"
            f"\n`{payload['command']}`")


def warm_start(net, batches) -> None:
    """Explicit warm start of a SwitchNet: ``observe`` every batch (labelled rows get running
    keys where the API asks for them), then ``solve`` all layers."""
    import inspect

    takes_keys = "keys" in inspect.signature(net.observe).parameters
    key = 0
    for b in batches:
        if takes_keys:
            keys = list(range(key, key + len(b.lengths)))
            key += len(keys)
            net.observe(b, keys=keys)
        else:
            net.observe(b)
    net.solve()
