"""`edge-plm run --audio FILE...`: the service's loop on WAV files instead of a microphone, on
simulated pins, with the keyboard as the person's switch (try it without a Pi).

`FileSession` is the input source: each WAV file in turn (silence trimmed, as the microphone's
endpointer would), `gap_s` seconds apart, and one printed line per file saying what the device
heard and did; labels are printed as their windows close. After the last file it waits until
every open question or override window has closed and its label was printed, then ends (the
service stops as at the end of stdin).

`KeySwitch` reads the keyboard (or any stream: a pipe in the tests): each space flips the
simulated person's switch, by driving the switch's pin on gpiozero's MockFactory, the way a hand
on a real switch changes the level on its GPIO. On a terminal it is put in cbreak mode, so a
space acts at once; on a pipe or a line-buffered terminal the space acts when its line arrives
(press Enter). With several devices (``[[devices]]``) the keys 1-9 flip the switch of device 1-9
(space: the first device's). ``q`` ends the run. What the flip did to the relay is printed.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from edge_plm.loop.controller import Item, wav_inputs
from edge_plm.voice.audio import AudioError, audio_files_in, check_wav
from edge_plm.voice.endpoint import Endpointer

log = logging.getLogger(__name__)


def audio_paths(paths: list[Path]) -> list[Path]:
    """WAV files from `paths`: files as given, directories as their sorted ``*.wav``.
    AudioError names the first path that is neither (a missing or unreadable file, one that
    is not a WAV file, or a directory without WAV files)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = audio_files_in(p)
            if not found:
                raise AudioError(f"{p}: no .wav files in this directory")
            out += found
        else:
            check_wav(p)
            out.append(p)
    if not out:
        raise AudioError("no audio files given")
    return out


def default_gap_s(policy) -> float:
    """The default time between two files: the longest label window (ask, override) + 1 s, so
    that a file's window closes, and its label is printed, before the next file supersedes it."""
    return max(policy.ask_window_s, policy.override_window_s) + 1.0


class Printer:
    """One line at a time to `out` (the key thread and the file loop both print)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self._lock:
            self.out.write(line + "\n")
            self.out.flush()


def _word(on: bool) -> str:
    return "ON" if on else "OFF"


class KeySwitch:
    """Space flips the simulated switch of `controller`'s devices; ``q`` calls `on_quit`."""

    def __init__(self, controller, stream: IO, printer: Printer, on_quit) -> None:
        self.controller = controller
        self.stream = stream
        self.print = printer
        self.on_quit = on_quit
        self.flips = 0
        self._fd = stream.fileno()
        self._terminal = _Cbreak(self._fd)
        self._flipping = threading.Lock()  # held while a flip is applied and reported
        self._thread = threading.Thread(target=self._read, name="edge-plm-keys", daemon=True)

    def start(self) -> None:
        """cbreak mode on a terminal (restored by `stop`, or at exit), then read keys."""
        self._terminal.enter()
        atexit.register(self._terminal.leave)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Let a flip in progress be reported, give the terminal back its mode (the reader
        thread ends with the process)."""
        if self._flipping.acquire(timeout=timeout_s):
            self._flipping.release()
        self._terminal.leave()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 64)
            except OSError as exc:
                log.error("keyboard input failed: %s; the switch keys are off", exc)
                return
            if not chunk:
                return  # end of input: files keep playing
            for byte in chunk:
                names = list(self.controller.devices.switches)
                if byte == ord(" "):
                    self.flip()
                elif self.controller.household.several and ord("1") <= byte < ord("1") + min(len(names), 9):
                    self.flip(names[byte - ord("1")])
                elif byte in b"qQ":
                    self.print("q: stopping")
                    self.on_quit()
                    return

    def flip(self, device: str | None = None) -> None:
        """Drive the switch pin of `device` (None: the first device's) as a hand would, then
        report what its relay did."""
        with self._flipping:
            self._flip(device)

    def _flip(self, device: str | None) -> None:
        devices = self.controller.devices
        name = device or next(iter(devices.switches))
        switch, relay = devices.switches[name], devices.relays[name]
        key = (f"space{self.controller.household.of(name, ' ({})')}" if device is None
               else f"{list(devices.switches).index(name) + 1} ({name})")
        pin = devices.factory.pin(switch.cfg.pin)
        before = relay.is_on
        settle = 2 * switch.cfg.bounce_ms / 1000 + 0.02  # past the debounce filter
        if switch.cfg.mode == "toggle":
            (pin.drive_high if pin.state == 0 else pin.drive_low)()
        else:  # a push button: press, hold past the debounce, release
            pressed, released = ((pin.drive_low, pin.drive_high) if switch.cfg.pull_up
                                 else (pin.drive_high, pin.drive_low))
            pressed()
            time.sleep(settle)
            released()
        self.flips += 1
        # the controller's pump applies the flip (every 100 ms), after the relay's rate limit
        limited = relay.next_allowed() > time.monotonic()
        deadline = max(relay.next_allowed(), time.monotonic()) + 3.0 + settle  # pump may be learning
        while relay.is_on == before and time.monotonic() < deadline:
            time.sleep(0.02)
        after = " (after the relay's rate limit)" if limited else ""
        if relay.is_on != before:
            self.print(f"{key}: switch flipped ({switch.cfg.mode}) -> relay {_word(relay.is_on)}{after}")
        else:
            self.print(f"{key}: switch flipped ({switch.cfg.mode}) -> relay still {_word(before)}")


class _Cbreak:
    """A terminal in cbreak mode (keys without Enter; Ctrl-C still works) between `enter` and
    `leave` (idempotent); nothing for a pipe or a file."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.saved = None

    def enter(self) -> None:
        if not os.isatty(self.fd):
            return
        import termios  # noqa: PLC0415 - POSIX terminals only
        import tty  # noqa: PLC0415

        self.saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)

    def leave(self) -> None:
        saved, self.saved = self.saved, None
        if saved is not None:
            import termios  # noqa: PLC0415

            termios.tcsetattr(self.fd, termios.TCSADRAIN, saved)


class FileSession:
    """The input source of ``run --audio``; `attach` it to the controller before iterating."""

    def __init__(self, paths: list[Path], endpointer: Endpointer | None, gap_s: float,
                 keys: IO | None, out: IO[str]) -> None:
        self.paths = paths
        self.endpointer = endpointer
        self.gap_s = gap_s
        self.keys = keys
        self.print = Printer(out)
        self.controller = None
        self.key_switch: KeySwitch | None = None
        self._closed = threading.Event()
        self._labelled: set = set()  # interaction ids whose resolution was printed
        self._decided: set = set()  # interaction ids that opened a window (act, ask, ignore)

    def attach(self, controller) -> None:
        self.controller = controller
        if self.keys is not None:
            self.key_switch = KeySwitch(controller, self.keys, self.print, self.close)
            self.key_switch.start()

    def close(self) -> None:
        self._closed.set()

    def __iter__(self) -> Iterator[Item]:
        if self.controller is None:
            raise RuntimeError("FileSession.attach(controller) first")
        names = list(self.controller.devices.switches)
        g = self.controller.devices.switches[names[0]].cfg  # space flips the first device's
        keys = (f"; keys 1-{min(len(names), 9)} flip the switch of "
                + ", ".join(f"{i} {n}" for i, n in enumerate(names[:9], 1))
                ) if self.controller.household.several else ""
        self.print(f"playing {len(self.paths)} file(s), {self.gap_s:g} s apart; GPIO simulated "
                   f"(MockFactory); press space to flip the switch ({g.mode}){keys}, q to stop")
        try:
            for n, item in enumerate(wav_inputs(self.paths, self.endpointer), 1):
                if self._closed.is_set():
                    return
                yield item
                self._report(n, item)
                self._wait(self.gap_s)
            self._wait_for_labels()
        finally:
            if self.key_switch is not None:
                self.key_switch.stop()

    def _wait_for_labels(self) -> None:
        """Until every decided interaction's window has closed and its label was printed (the
        pump resolves them; at most the longest window plus a margin after the last file)."""
        p = self.controller.settings.policy
        longest = max(p.ask_window_s, p.override_window_s) + 5.0
        deadline = time.monotonic() + longest
        while not self._closed.is_set() and time.monotonic() < deadline:
            self._print_labels()
            if self._decided <= self._labelled:
                return
            self._closed.wait(0.1)
        if not self._closed.is_set():
            log.warning("interactions %s had no label %.0f s after the last file",
                        sorted(self._decided - self._labelled), longest)

    def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._closed.is_set():
            self._print_labels()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._closed.wait(min(left, 0.1))

    def _report(self, n: int, item: Item) -> None:
        store = self.controller.store
        row = store.get(store.last_interaction_id())
        name = Path(item.path or "?").name
        if row.error:
            self.print(f"[{n}/{len(self.paths)}] {name}: #{row.id} error: {row.error}")
            return
        did = self._did(row)
        if row.decision is not None:
            self._decided.add(row.id)
        conf = f" {row.confidence:.2f}" if row.confidence is not None else ""
        prediction = row.prediction
        kind = store.kind(row.id) if store.has_kinds() else None
        if kind is not None and kind.done is not None:  # a dimmer or a question (the kind head)
            prediction, conf, did = kind.predicted, f" {kind.confidence:.2f}", kind.did()
        self.print(f"[{n}/{len(self.paths)}] {name}: #{row.id} heard {row.transcript!r} -> "
                   f"{prediction}{conf}: {did}")

    def _did(self, row) -> str:
        """What the device did with the utterance of `row`: with several devices, which
        relay it switched and which device it is in doubt about (and the key of its switch)."""
        c = self.controller
        if not c.household.several:
            return {"act": f"act, relay {_word(c.devices.relays[c.household.names[0]].is_on)}",
                    "ask": "ask (LED blinks): flip the switch (space) the way you want it",
                    "ignore": "ignore"}.get(row.decision or "", row.decision or "nothing")
        names = list(c.devices.switches)
        parts = []
        for name, o in c.store.device_outcomes([row.id]).get(row.id, {}).items():
            number = names.index(name) + 1
            if o.decision == "act":
                parts.append(f"act, {name} relay {_word(c.devices.relays[name].is_on)}")
            elif o.decision == "ask":
                key = f"key {number}" if number <= 9 else "its switch"
                parts.append(f"ask about {name} (device {number}, LED blinks): flip its switch "
                             f"({key}) the way you want it")
        return "; ".join(parts) or row.decision or "nothing"

    def _print_labels(self) -> None:
        for r in list(self.controller.resolutions):
            if r.key in self._labelled:
                continue
            self._labelled.add(r.key)
            what = "not labelled" if r.label is None else f"labelled {r.label.value}"
            self.print(f"#{r.key} {what} ({r.reason})")
