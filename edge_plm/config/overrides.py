"""``KEY=VALUE`` overrides of a configuration dataclass (``train switch --set``, ``train lm
--set``): each value typed as the field's current value is."""

from __future__ import annotations

import dataclasses


def typed_overrides(base, items: list[str], fixed: tuple[str, ...] = ("name",)) -> dict:
    """``items`` as {field: value} for the dataclass instance ``base``: a bool field takes
    true / false, a tuple field comma-separated ints, any other field its own type. ValueError
    with a one-line reason for an unknown or ``fixed`` field or a value of the wrong type."""
    known = {f.name for f in dataclasses.fields(base)}
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or key not in known or key in fixed:
            raise ValueError(f"expected KEY=VALUE with KEY a model-configuration field, got {item!r}")
        cur = getattr(base, key)
        try:
            if isinstance(cur, bool):
                if value.lower() not in ("true", "false"):
                    raise ValueError
                out[key] = value.lower() == "true"
            elif isinstance(cur, tuple):
                out[key] = tuple(int(v) for v in value.split(","))
            else:
                out[key] = type(cur)(value)
        except ValueError:
            raise ValueError(f"{key} needs a value of type {type(cur).__name__}, got {value!r}") from None
    return out
