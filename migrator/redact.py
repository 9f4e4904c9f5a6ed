"""Secrets and their redaction: a value that never prints, and a renderer for configs.

Credentials live in `Secret` from the moment the YAML is parsed; only the client factory
calls `reveal()`. A savepoint is the YAML with every value the model parsed as a `Secret`
replaced (`config.document.redact_secrets`: by type, whatever the key's spelling), then passed through
`redact_config`, which also replaces the values of the documented credential keys by name.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

REDACTED = "<redacted>"

# Keys whose values are secrets wherever they appear in a config mapping.
SECRET_KEYS = frozenset({"accessKey", "secretKey", "sessionToken"})


@dataclass(frozen=True)
class Secret:
    """A credential value whose repr and str never show it."""

    _value: str = field(repr=False)

    def reveal(self) -> str:
        return self._value

    def __str__(self) -> str:
        return REDACTED

    def __repr__(self) -> str:
        return f"Secret({REDACTED!r})"


def redact_config(raw: object) -> object:
    """Return a deep copy of a parsed YAML config with every credential value replaced."""
    redacted = copy.deepcopy(raw)
    _redact_in_place(redacted)
    return redacted


def _redact_in_place(node: object) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in SECRET_KEYS and value is not None:
                node[key] = REDACTED
            else:
                _redact_in_place(value)
    elif isinstance(node, list):
        for value in node:
            _redact_in_place(value)
