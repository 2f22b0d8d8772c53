"""The deciding sections: ``[policy]`` (act, ask or ignore, and the windows), ``[timers]``
(timed commands) and ``[kinds]`` (dim, brighten, a level, questions), each with its checks
(`problems`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from edge_plm.config.keys import Problems, setting


@dataclass
class PolicyConfig:
    act_threshold: float = setting(0.80, "confidence at or above which the device acts")
    ask_threshold: float = setting(0.35, "between ask and act: ask; below: ignore (treated as NOOP)")
    ask_window_s: float = 8.0
    override_window_s: float = 10.0
    # after ASK / IGNORE with no flip, label NOOP only if the model gave the relay's current
    # state less than this probability (else no label: "no flip" cannot tell S from NOOP)
    ambiguity_floor: float = 0.2
    # a transcript whose words outside filler words ("the", "uh", "it"...) hold fewer letters is
    # junk: never acted on, never labelled ON/OFF (edge_plm/decide/content.py, docs/policy.md)
    min_content_letters: int = 4

    def problems(self) -> list[str]:
        """The [policy] checks (also `Policy`'s: it refuses exactly these)."""
        out = Problems()
        out.need(all(math.isfinite(v) for v in (self.ask_threshold, self.act_threshold, self.ambiguity_floor,
                                                self.ask_window_s, self.override_window_s)),
                 "policy: thresholds and windows must be finite numbers")
        out.need(0.0 <= self.ask_threshold <= self.act_threshold <= 1.0,
                 "policy: need 0 <= ask_threshold <= act_threshold <= 1, got ask_threshold "
                 f"{self.ask_threshold}, act_threshold {self.act_threshold}")
        out.need(0.0 <= self.ambiguity_floor <= 1.0,
                 f"policy.ambiguity_floor must be in [0, 1], got {self.ambiguity_floor}")
        out.need(self.min_content_letters >= 0,
                 f"policy.min_content_letters must be >= 0, got {self.min_content_letters}")
        out.need(self.ask_window_s > 0, f"policy.ask_window_s must be > 0, got {self.ask_window_s}")
        out.need(self.override_window_s > 0,
                 f"policy.override_window_s must be > 0, got {self.override_window_s}")
        return out


@dataclass
class TimersConfig:
    """``[timers]``: timed commands ("turn off the lights in twenty minutes"; docs/loop.md,
    "Timed commands")."""

    enabled: bool = setting(True, "read a time in a command and act at that time (off: a "
                                  "command with a time is decided as one without)")
    grace_s: float = setting(300.0, "a timer that fell due while the device was off runs at "
                                    "start if it is at most this late, else it is dropped and "
                                    "logged (0..86400)")
    max_delay_s: float = setting(86400.0, "a time further ahead than this is not a timer: the "
                                          "command is asked about (60..604800)")

    def problems(self) -> list[str]:
        """The [timers] checks."""
        t, out = self, Problems()
        out.need(math.isfinite(t.grace_s) and 0 <= t.grace_s <= 86400,
                 f"timers.grace_s must be in 0..86400, got {t.grace_s}")
        out.need(math.isfinite(t.max_delay_s) and 60 <= t.max_delay_s <= 604800,
                 f"timers.max_delay_s must be in 60..604800, got {t.max_delay_s}")
        return out


@dataclass
class KindsConfig:
    """``[kinds]``: the actions beyond on and off the kind head reads (docs/loop.md, "Dimmers
    and questions"). Dimming needs a ``kind = "dimmer"`` device; questions need nothing."""

    dimmers: bool = setting(True, "dim, brighten and set the level of ``kind = \"dimmer\"`` "
                                  "devices by voice (a household without a dimmer never reads it)")
    questions: bool = setting(True, "answer \"is the heater on?\": aloud with talk-back, else on "
                                    "the LED; never moves a relay")
    act_threshold: float = setting(0.80, "the kind head's confidence at or above which a dimmer "
                                         "moves or a question is answered")
    ask_threshold: float = setting(0.50, "a dim/brighten/level call between this and act_threshold "
                                         "is asked about (the dimmer's knob answers); the switch "
                                         "model never switches that dimmer on it")
    teach_window_s: float = setting(10.0, "a turn of a dimmer's knob (or a brightness from the home "
                                          "hub) this soon after an utterance teaches its kind")

    def problems(self) -> list[str]:
        """The [kinds] checks."""
        k, out = self, Problems()
        out.need(all(math.isfinite(v) for v in (k.act_threshold, k.ask_threshold, k.teach_window_s)),
                 "kinds: thresholds and windows must be finite numbers")
        out.need(0.0 <= k.ask_threshold <= k.act_threshold <= 1.0,
                 "kinds: need 0 <= ask_threshold <= act_threshold <= 1, got ask_threshold "
                 f"{k.ask_threshold}, act_threshold {k.act_threshold}")
        out.need(0 < k.teach_window_s <= 600, f"kinds.teach_window_s must be in (0, 600], got {k.teach_window_s}")
        return out
