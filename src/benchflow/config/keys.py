"""Which dotted keys the schema has: the one check behind every "no key ...; allowed
keys ..." message (a sweep's overrides, a chosen config file's keys, a rerun's extra
overrides)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence


def unknown_key(key: str, groups: Sequence[str]) -> str | None:
    """Why a dotted key is not one of the schema's ('no key ...; allowed keys ...'), or
    None. Below a field that is a value or a free-form mapping, Hydra checks types."""
    from benchflow.config.schema import BenchConfig

    cls: typing.Any = BenchConfig
    done: list[str] = []
    for part in key.split("."):
        fields = {f.name for f in dataclasses.fields(cls)}
        if part not in fields:
            allowed = sorted(fields | (set(groups) if not done else set()))
            where = ".".join(done) + "." if done else ""
            which = "keys" if not done else "keys of " + ".".join(done)
            return f"no key {where}{part}; allowed {which}: " + ", ".join(allowed)
        done.append(part)
        hint = typing.get_type_hints(cls)[part]
        if not dataclasses.is_dataclass(hint):
            return None
        cls = hint
    return None
