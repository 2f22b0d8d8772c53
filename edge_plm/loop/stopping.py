"""The stop flag of `run` and `replay`: SIGTERM (what systemd sends) and SIGINT (Ctrl-C) set it,
and the loop, the learner and the replay look at it at their safe points.

The handler only records the signal and sets the flag (and runs the wakers registered with
`StopFlag.on_set`, e.g. closing the microphone loop, which is itself a flag). It never raises
and takes no lock, so a signal cannot land in the middle of a database write, a checkpoint
save or a Numba kernel: whatever is running finishes, and the code that checks the flag
stops, saves what was learned and puts the relay in its stop state. Light on purpose: the CLI
installs it before the slow imports of start-up.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopFlag:
    """A flag with the part of `threading.Event`'s interface the loop uses (`is_set`, `set`,
    `wait`), safe to set from a signal handler (an Event takes a lock in `set`)."""

    def __init__(self) -> None:
        self._set = False
        self.signal_name: str | None = None  # the signal that set it, if one did
        self._wakers: list[Callable[[], None]] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        for wake in list(self._wakers):
            wake()

    def on_set(self, wake: Callable[[], None]) -> None:
        """Call `wake` when the flag is set (at once if it already is); `wake` must be as
        simple as setting a flag: it may run inside a signal handler."""
        self._wakers.append(wake)
        if self._set:
            wake()

    def wait(self, timeout: float) -> bool:
        """Sleep until the flag is set or `timeout` seconds passed; whether it is set."""
        deadline = time.monotonic() + timeout
        while not self._set:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(0.05, left))
        return self._set

    def reason(self) -> str:
        return self.signal_name or "a stop request"


_current: StopFlag | None = None
_previous: dict[signal.Signals, object] = {}


def install(signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> StopFlag:
    """The `StopFlag` that `signals` set from now on (main thread only). Idempotent: the flag
    already installed in this process (e.g. by the CLI's entry point, before its imports) is
    returned, so a signal that came before this call is not lost."""
    global _current
    if _current is not None:
        return _current
    flag = StopFlag()

    def on_signal(signum: int, frame: object) -> None:
        flag.signal_name = signal.Signals(signum).name
        flag.set()

    for sig in signals:
        _previous[sig] = signal.signal(sig, on_signal)
    _current = flag
    return flag


def uninstall() -> None:
    """Put back the handlers `install` replaced."""
    global _current
    for sig, handler in _previous.items():
        signal.signal(sig, handler)
    _previous.clear()
    _current = None


@contextmanager
def handling() -> Iterator[StopFlag]:
    """`install`, and `uninstall` when the block ends (a command run inside a test process
    leaves that process's handlers as they were)."""
    flag = install()
    try:
        yield flag
    finally:
        uninstall()


def install_early(argv: list[str], commands: tuple[str, ...] = ("run", "replay", "demo")) -> None:
    """`install` if the command line runs one of `commands` (its first word that is not an
    option): called by the CLI before it imports the rest, so that a SIGTERM during that
    second of start-up is a clean stop too."""
    words = [a for a in argv[1:] if not a.startswith("-")]
    if words and words[0] in commands:
        install()


__all__ = ["STOP_SIGNALS", "StopFlag", "handling", "install", "install_early", "uninstall"]
