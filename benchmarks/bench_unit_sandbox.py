"""Does edge-plm run inside what deploy/edge-plm.service allows? (no systemd needed)

The unit's tightest settings are rebuilt here as far as a root shell without systemd as PID 1
can: a seccomp filter that answers EPERM to every system call of the groups the unit denies
(``SystemCallFilter=~@privileged @resources``; the names come from
``systemd-analyze syscall-filter``, so they are systemd's own lists), and a /proc mounted with
``subset=pid,hidepid=invisible`` in a private mount and PID namespace (``ProcSubset=pid``,
``ProtectProc=invisible``). The unit's environment (``NUMBA_CPU_NAME=generic``, a fresh
``NUMBA_CACHE_DIR``) is set. Then the service's work runs in it: the Numba warm-up from a cold
cache, ``run`` (text source, mock pins: gpiozero's MockFactory), ``demo`` (pocketsphinx on the
packaged WAVs) and ``doctor``. Each must exit 0. The filter is checked first: ``setpriority``
and ``setgroups`` must fail with EPERM under it.

Also prints the unit's exposure (``systemd-analyze security --offline=yes``), and with
``--cpu-cost`` what ``NUMBA_CPU_NAME=generic`` costs: median predict and learn times of the
shipped starting model over the bundled sample data, compiled for this host's CPU and for the
generic CPU, each in a fresh process with its own cold cache, warmed before timing (same run:
compare the ratio, the machine is shared).

Not covered here: real GPIO (lgpio on /dev/gpiochip*, RPi.GPIO on /dev/gpiomem) and a real
microphone (ALSA); those need the board (docs/deploy.md).

Usage (as root, Debian with systemd installed, util-linux unshare, libseccomp2):
    python benchmarks/bench_unit_sandbox.py [--json] [--cpu-cost]
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "deploy" / "edge-plm.service"
DENIED_GROUPS = ("@privileged", "@resources")
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_ERRNO = 0x00050000


def group_syscalls(groups: tuple[str, ...] = DENIED_GROUPS) -> list[str]:
    """The system calls of systemd's `groups`, nested groups expanded (systemd's own lists)."""
    out = subprocess.run(["systemd-analyze", "syscall-filter", *groups], capture_output=True,
                         text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        word = line.strip()
        if word and not word.startswith(("#", "@")) and re.fullmatch(r"[a-z0-9_]+", word):
            names.add(word)
    return sorted(names)


def apply_filter(names: list[str]) -> int:
    """Load a seccomp filter: EPERM for `names`, everything else allowed. Returns the number of
    system calls denied (names this architecture does not have are skipped)."""
    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    denied = 0
    for name in names:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:  # not a system call of this architecture (e.g. setuid32 on x86_64)
            continue
        rc = lib.seccomp_rule_add(ctx, SCMP_ACT_ERRNO | errno.EPERM, nr, 0)
        if rc != 0:
            raise OSError(-rc, f"seccomp_rule_add({name})")
        denied += 1
    rc = lib.seccomp_load(ctx)
    if rc != 0:
        raise OSError(-rc, "seccomp_load")
    return denied


def filter_works() -> dict[str, str]:
    """Under the filter: what setpriority and setgroups answer (EPERM expected)."""
    out = {}
    for name, call in (("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, 0, 1)),
                       ("setgroups", lambda: os.setgroups(os.getgroups()))):
        try:
            call()
            out[name] = "allowed"
        except OSError as exc:
            out[name] = errno.errorcode.get(exc.errno, str(exc.errno))
    return out


def exposure() -> str:
    out = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(UNIT)],
                         capture_output=True, text=True).stdout
    found = re.search(r"Overall exposure level for \S+: ([0-9.]+)", out)
    return found.group(1) if found else "?"


def _inner(argv: list[str]) -> None:
    """Child: apply the filter, then exec `argv`."""
    n = apply_filter(group_syscalls())
    if argv[:1] == ["--check"]:
        print(json.dumps({"denied": n, **filter_works()}))
        return
    os.execvp(argv[0], argv)


def _sandboxed(cmd: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess:
    """`cmd` in a private PID + mount namespace with /proc subset=pid, under the filter."""
    inner = [sys.executable, str(Path(__file__).resolve()), "--inner", "--", *cmd]
    script = ("mount -t proc -o subset=pid,hidepid=invisible proc /proc && "
              "test ! -e /proc/cpuinfo && exec \"$@\"")
    return subprocess.run(["unshare", "--mount", "--pid", "--fork", "--mount-proc",
                           "sh", "-c", script, "sh", *inner],
                          capture_output=True, text=True, env=env, input=stdin, timeout=900)


def scenarios(work: Path) -> list[tuple[str, list[str], str]]:
    exe = [sys.executable, "-c", "from edge_plm.cli import main; main()"]
    config = work / "config.toml"
    config.write_text(f'[paths]\nstate_dir = "{work / "state"}"\n[audio]\nsource = "text"\n'
                      '[gpio]\npin_factory = "mock"\n')
    return [
        ("filter check", ["--check"], ""),
        ("doctor --warm-cache (cold cache)", [*exe, "doctor", "--warm-cache", "--config", str(config)], ""),
        ("run: text source, mock pins", [*exe, "run", "--config", str(config)],
         "turn on the light\n\nwhat time is it\nturn off the light\n"),
        ("demo: pocketsphinx, 8 utterances", [*exe, "demo", "--limit", "8", "--rounds", "1",
                                              "--db", str(work / "demo" / "edge-plm.db")], ""),
        ("doctor", [*exe, "doctor", "--config", str(config)], ""),
    ]


COST = """
import json, statistics, time
import edge_plm
from edge_plm.config.starting_model import shipped_path
from edge_plm.switch.model import SwitchModel
rows = [json.loads(x) for x in open("edge_plm/data/switch-sample-train.jsonl") if x.strip()]
warm = SwitchModel.load(shipped_path("switch-en"))
for r in rows[:20]:
    warm.predict(r["text"]); warm.learn(r["text"], r["label"])
model = SwitchModel.load(shipped_path("switch-en"))
p, u = [], []
for r in rows:
    t0 = time.perf_counter(); model.predict(r["text"]); t1 = time.perf_counter()
    model.learn(r["text"], r["label"]); t2 = time.perf_counter()
    p.append((t1 - t0) * 1e3); u.append((t2 - t1) * 1e3)
print(json.dumps({"rows": len(rows), "predict_ms": statistics.median(p), "learn_ms": statistics.median(u)}))
"""


def cpu_cost() -> dict:
    """Median predict / learn ms compiled for the host CPU and for NUMBA_CPU_NAME=generic."""
    out = {}
    for cpu in ("host", "generic"):
        with tempfile.TemporaryDirectory(prefix="edge-plm-cpu-") as tmp:
            env = {**os.environ, "NUMBA_CACHE_DIR": tmp, "OPENBLAS_NUM_THREADS": "1",
                   "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
            env.pop("NUMBA_CPU_NAME", None)
            if cpu == "generic":
                env["NUMBA_CPU_NAME"] = "generic"
            proc = subprocess.run([sys.executable, "-c", COST], capture_output=True, text=True,
                                  env=env, cwd=ROOT, timeout=900, check=True)
            out[cpu] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["generic_over_host"] = {k: round(out["generic"][k] / out["host"][k], 3)
                                for k in ("predict_ms", "learn_ms")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cpu-cost", action="store_true", help="also time host vs generic CPU kernels")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("cmd", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        _inner(args.cmd)
        return
    results = []
    with tempfile.TemporaryDirectory(prefix="edge-plm-sandbox-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "NUMBA_CACHE_DIR": str(work / "numba-cache"), "NUMBA_CPU_NAME": "generic",
               "HOME": str(work), "PYTHONDONTWRITEBYTECODE": "1", "EDGE_PLM_CONFIG": str(work / "config.toml")}
        for name, cmd, stdin in scenarios(work):
            t0 = time.perf_counter()
            proc = _sandboxed(cmd, env, stdin)
            entry = {"scenario": name, "rc": proc.returncode, "seconds": round(time.perf_counter() - t0, 1)}
            if name == "filter check" and proc.returncode == 0:
                entry.update(json.loads(proc.stdout.strip().splitlines()[-1]))
            elif proc.returncode != 0:
                entry["stderr"] = proc.stderr[-2000:]
            if name.startswith("doctor") and proc.returncode == 0:
                entry["numba_cache"] = next((line.strip() for line in proc.stdout.splitlines()
                                             if "numba_cache" in line or "compiled in" in line), "")
            results.append(entry)
    summary = {"unit": str(UNIT.relative_to(ROOT)), "exposure": exposure(),
               "denied_groups": list(DENIED_GROUPS), "results": results,
               "all_ok": all(r["rc"] == 0 for r in results)
               and results[0].get("setpriority") == "EPERM" and results[0].get("setgroups") == "EPERM"}
    if args.cpu_cost:
        summary["cpu_cost"] = cpu_cost()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"exposure of {summary['unit']}: {summary['exposure']}")
        for r in results:
            extra = {k: v for k, v in r.items() if k not in ("scenario", "rc", "seconds")}
            print(f"  {'ok  ' if r['rc'] == 0 else 'FAIL'} {r['scenario']} ({r['seconds']} s) {extra or ''}")
        if args.cpu_cost:
            print(f"  NUMBA_CPU_NAME=generic vs host: {json.dumps(summary['cpu_cost'])}")
        print("all ok" if summary["all_ok"] else "NOT ok")
    sys.exit(0 if summary["all_ok"] else 1)


if __name__ == "__main__":
    main()
