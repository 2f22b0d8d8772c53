"""The root of the errors whose message is meant for a person.

Each module that can fail for a reason a person can fix (a bad config, a missing model, a file
that is not what it should be, a database that cannot be opened, ...) raises its own error
class, and that class inherits from `EdgePlmError` as well as from the built-in error it always
was (``class ConfigError(EdgePlmError, ValueError)``), so existing ``except ValueError`` clauses
keep catching it. The CLI prints such an error as its one-line message (`edge_plm.cli.common.
describe`); any other exception that reaches it is reported as an internal error (a bug).

A leaf module: it imports nothing, so every package may import it (`plm` and `switch` too).
"""


class EdgePlmError(Exception):
    """An error whose message is meant for a person (what went wrong, what to do)."""


__all__ = ["EdgePlmError"]
