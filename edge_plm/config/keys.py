"""What every configuration section is made of: a key with its default and help (`setting`),
and the problems a section's checks collect (`Problems`)."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any


def setting(default: Any, text: str) -> Any:
    """A config key with its built-in default and the one-line help shown in the generated
    config file (``metadata["help"]``). A list default is copied for every instance."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": text})
    return field(default=default, metadata={"help": text})


def help_of(f: dataclasses.Field) -> str:
    """The help text of a config key ("" when it has none)."""
    return f.metadata.get("help", "")


class Problems(list):
    """The messages of one validation step: `need` adds one when its condition fails."""

    def need(self, ok: bool, message: str) -> None:
        if not ok:
            self.append(message)
