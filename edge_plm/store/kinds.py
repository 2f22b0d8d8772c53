"""What the kind head did and learned per utterance (``kinds``, schema v11; mixed into ReplayStore).

The kind head (`edge_plm.switch.kinds`) reads the actions beyond on and off: DIM, BRIGHTEN,
LEVEL (a dimmer) and QUERY (a question about the devices). One row per interaction it acted on
or was taught about: what it predicted, what the loop did (``dimmed`` / ``brightened`` /
``levelled`` / ``answered`` / ``asked``), the dimmer's level before and after, and the person's
label with its source (``control``: the dimmer's own knob or buttons; ``remote``: a brightness
from the home hub). The row holds no text: the transcript is the interaction's, so `forget`
deletes it with the interaction (the head is then rebuilt from what is left:
``kind_labels``).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Where a kind label came from.
KIND_LABEL_SOURCES = ("control", "remote", "spoken", "manual")
_COLUMNS = ("interaction_id, device, predicted, confidence, done, level_before, level_after, "
            "label, label_source, label_ts")


@dataclass(frozen=True)
class KindRow:
    """One row of ``kinds``."""

    interaction_id: int
    device: str | None
    predicted: str | None
    confidence: float | None
    done: str | None
    level_before: float | None
    level_after: float | None
    label: str | None
    label_source: str | None
    label_ts: float | None

    def did(self) -> str:
        """What the loop did with the call, in words ("dimmed lamp 100% -> 75%")."""
        where = f" {self.device}" if self.device else ""
        if self.done in ("dimmed", "brightened", "levelled") and self.level_after is not None:
            return f"{self.done}{where} {self.level_before:.0%} -> {self.level_after:.0%}"
        return {"asked": f"ask about{where} (LED blinks): turn its knob the way you want it",
                "answered": "answered (aloud with talk-back, else on the LED)",
                "held": "nothing (not a dimmer): no relay moves"}.get(self.done or "", self.done or "nothing")


class KindRows:
    """Recording the kind head's calls and the person's kind labels."""

    def has_kinds(self) -> bool:
        """The database has the kinds table (a file older than schema v11 opened read-only has
        not)."""
        with self._lock:
            return self.db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                   "name = 'kinds'").fetchone() is not None

    def record_kind(self, interaction_id: int, device: str | None, predicted: str | None,
                    confidence: float | None, done: str | None,
                    level_before: float | None = None, level_after: float | None = None) -> None:
        """What the head called and the loop did for interaction `interaction_id`."""
        row = [int(interaction_id), device, predicted, confidence, done, level_before, level_after]
        self._write(lambda: self.db.execute(
            "INSERT INTO kinds (interaction_id, device, predicted, confidence, done, level_before, "
            "level_after) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(interaction_id) DO UPDATE SET "
            "device = excluded.device, predicted = excluded.predicted, confidence = "
            "excluded.confidence, done = excluded.done, level_before = excluded.level_before, "
            "level_after = excluded.level_after", row))

    def label_kind(self, interaction_id: int, label: str, source: str, ts: float,
                   device: str | None = None) -> str | None:
        """The person's kind label for interaction `interaction_id` (a row is made if the head
        had not called it); returns the label it replaced (None: the first)."""
        if source not in KIND_LABEL_SOURCES:
            raise ValueError(f"a kind label source is one of {', '.join(KIND_LABEL_SOURCES)}, got {source!r}")

        def write() -> str | None:
            old = self.db.execute("SELECT label FROM kinds WHERE interaction_id = ?",
                                  [int(interaction_id)]).fetchone()
            self.db.execute(
                "INSERT INTO kinds (interaction_id, device, label, label_source, label_ts) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(interaction_id) DO UPDATE SET label = "
                "excluded.label, label_source = excluded.label_source, label_ts = excluded.label_ts, "
                "device = COALESCE(kinds.device, excluded.device)",
                [int(interaction_id), device, str(label), source, float(ts)])
            return None if old is None else old[0]

        return self._write(write)

    def kind(self, interaction_id: int) -> KindRow | None:
        with self._lock:
            row = self.db.execute(f"SELECT {_COLUMNS} FROM kinds WHERE interaction_id = ?",
                                  [int(interaction_id)]).fetchone()
        return None if row is None else KindRow(*row)

    def kind_labels(self) -> list[tuple[int, str, str]]:
        """(interaction id, transcript, label) of every kind label, oldest first: what the head
        learned from this household (rebuilt from these at start and after a forget)."""
        if not self.has_kinds():
            return []
        with self._lock:
            return [(int(i), t, lab) for i, t, lab in self.db.execute(
                "SELECT k.interaction_id, i.transcript, k.label FROM kinds k JOIN interactions i "
                "ON i.id = k.interaction_id WHERE k.label IS NOT NULL ORDER BY k.interaction_id")]

    def kind_tally(self, column: str) -> dict[str, int]:
        """How many rows hold each value of `column` (``done`` or ``label``), NULLs left out."""
        if column not in ("done", "label"):
            raise ValueError(f"kind_tally counts done or label, not {column!r}")
        with self._lock:
            return {v: int(n) for v, n in self.db.execute(
                f"SELECT {column}, COUNT(*) FROM kinds WHERE {column} IS NOT NULL GROUP BY {column} "
                f"ORDER BY {column}")}

    def kinds_of(self, interaction_ids: list[int]) -> dict[int, KindRow]:
        """The kind rows of `interaction_ids` (for ``log``)."""
        ids = [int(i) for i in interaction_ids]
        if not ids or not self.has_kinds():
            return {}
        with self._lock:
            rows = self.db.execute(f"SELECT {_COLUMNS} FROM kinds WHERE interaction_id IN "
                                   f"({', '.join('?' * len(ids))})", ids).fetchall()
        return {r[0]: KindRow(*r) for r in rows}
