"""The device's switch model: a transcript in, ON / OFF / NOOP out, learned online (pure computation, no I/O)."""
