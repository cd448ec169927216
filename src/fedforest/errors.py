"""Exceptions raised by fedforest."""

from __future__ import annotations


class PayloadError(ValueError):
    """A payload received from another site is malformed and was refused.

    The message names the sender (when known), the offending field and what
    was expected. Nothing from a refused payload is ever used.
    """

    def __init__(self, message: str, sender: str | None = None):
        self.sender = sender
        prefix = f"payload from {sender!r} refused: " if sender else "payload refused: "
        super().__init__(prefix + message)


class ConfigError(ValueError):
    """A configuration file or value is invalid.

    The message names the file, the key, the bad value and what is allowed.
    """


class SchemaError(ValueError):
    """Sites describe their tables in contradicting ways."""
