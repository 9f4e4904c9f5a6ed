"""What every block of the configuration shares: the model base, and the error that names a key.

Blocks are frozen (a loaded config is never changed behind its checks), read camelCase keys into
snake_case fields, and refuse unknown keys, so that a typo is an error with a did-you-mean
instead of a setting silently ignored.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ConfigModel(BaseModel):
    """Frozen, camelCase-aliased, and strict about unknown keys."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        arbitrary_types_allowed=True,
    )


class AtKey(ValueError):
    """A rule across blocks, raised by a model validator, naming the key at fault (pydantic would name none)."""

    def __init__(self, key_path: str, reason: str):
        super().__init__(reason)
        self.key_path = key_path
