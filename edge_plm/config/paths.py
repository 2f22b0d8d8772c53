"""``[paths]``: where the state lives (database, checkpoints, models, audio)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from edge_plm.config.keys import setting


def default_state_dir() -> Path:
    if os.environ.get("STATE_DIRECTORY"):  # set by systemd's StateDirectory=
        return Path(os.environ["STATE_DIRECTORY"].split(":")[0])
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "edge-plm"


@dataclass
class PathsConfig:
    state_dir: str = setting("", "empty: $STATE_DIRECTORY (the service: /var/lib/edge-plm), "
                                      "else $XDG_DATA_HOME/edge-plm (~/.local/share/edge-plm)")
    database: str = setting("", "empty: <state_dir>/edge-plm.db")
    models_dir: str = setting("", "empty: <state_dir>/models (installed ASR models)")
    checkpoints_dir: str = setting("", "no longer used: a database's checkpoints live in "
                                       "<database stem>.checkpoints/ beside it")
    keep_audio: bool = setting(False, "privacy: audio is not kept unless configured")
    log_transcripts: bool = setting(False, "privacy: transcripts in the log at INFO (DEBUG always shows them)")
    audio_dir: str = setting("", "empty: <state_dir>/audio")

    # a leading ``~`` is the home directory, as in a shell (never a literal ``./~`` folder)
    def state(self) -> Path:
        return Path(self.state_dir).expanduser() if self.state_dir else default_state_dir()

    def database_path(self) -> Path:
        return Path(self.database).expanduser() if self.database else self.state() / "edge-plm.db"

    def models_path(self) -> Path:
        return Path(self.models_dir).expanduser() if self.models_dir else self.state() / "models"

    def checkpoints_path(self) -> Path:
        """The database's own checkpoint folder (`ReplayStore.checkpoints_home`)."""
        db = self.database_path()
        return db.parent / f"{db.stem}.checkpoints"

    def audio_path(self) -> Path:
        return Path(self.audio_dir).expanduser() if self.audio_dir else self.state() / "audio"
