"""Which dotted keys the schema has, and the type of each: the one check behind every
"no key ...; allowed keys ..." message (a sweep's overrides, a chosen config file's
keys, a rerun's extra overrides) and every "not an integer; allowed: ..." one."""

from __future__ import annotations

import dataclasses
import types
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
            import difflib

            allowed = sorted(fields | (set(groups) if not done else set()))
            where = ".".join(done) + "." if done else ""
            which = "keys" if not done else "keys of " + ".".join(done)
            close = difflib.get_close_matches(part, allowed, n=1)
            hint = f"did you mean {where}{close[0]}? " if close else ""
            return f"no key {where}{part}; {hint}allowed {which}: " + ", ".join(allowed)
        done.append(part)
        hint = typing.get_type_hints(cls)[part]
        if not dataclasses.is_dataclass(hint):
            return None
        cls = hint
    return None


# A value's type as a message names it: what the value is not, and what is allowed.
TYPE_WORDS: dict[type, tuple[str, str]] = {
    bool: ("a boolean", "true or false"),
    int: ("an integer", "an integer"),
    float: ("a number", "a number"),
    str: ("a string", "a string"),
    list: ("a list", "a list, e.g. [a,b]"),
}


def wrong_type(key: str, value: object) -> str | None:
    """Why `value` (as Hydra's override parser reads it) cannot be the schema's `key`
    ('not an integer; allowed: an integer >= 0'), judged by OmegaConf's own conversion
    as Hydra's merge would; None where it can, or where `key` names no schema value."""
    from omegaconf import OmegaConf
    from omegaconf.errors import ValidationError

    from benchflow.config.schema import LOWER_BOUNDS, BenchConfig

    *sections, name = key.split(".")
    cls: typing.Any = BenchConfig
    for part in sections:
        cls = _field_types(cls).get(part)
        if not dataclasses.is_dataclass(cls):
            return None
    hint = _field_types(cls).get(name)
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    kinds = [typing.get_origin(k) or k for k in (typing.get_args(hint) if union else (hint,))]
    if not kinds or not all(k in TYPE_WORDS or k is type(None) for k in kinds):
        return None  # no such field, a section (a group's choice) or a mapping
    try:
        OmegaConf.update(OmegaConf.structured(cls), name, value, merge=True)
        return None
    except ValidationError:
        pass
    kind = next(k for k in kinds if k is not type(None))
    noun, allowed = TYPE_WORDS[kind]
    if (bound := LOWER_BOUNDS.get(key)) and kind in (int, float):
        allowed += f" {bound}"
    return f"not {noun}; allowed: {allowed}" + (" or null" if type(None) in kinds else "")


def _field_types(cls: typing.Any) -> dict[str, typing.Any]:
    """A schema dataclass's fields and their types; none for anything else."""
    return typing.get_type_hints(cls) if dataclasses.is_dataclass(cls) else {}


def field_comments(cls: type) -> dict[str, str]:
    """Each field of a schema dataclass, and the comment the schema gives it (the one on
    its line, else the block just above it), as one line. The schema's comments are the
    keys' one definition: --help shows them."""
    import inspect
    import io
    import re
    import tokenize

    source = inspect.getsource(cls)
    comments = {
        tok.start[0]: tok.string.lstrip("#").strip()
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    lines = source.splitlines()
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    found: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        match = re.match(r"\s+(\w+):", line)
        if not match or match[1] not in names:
            continue
        text = [comments[number]] if number in comments else []
        above = number - 1
        while not text and above in comments and lines[above - 1].lstrip().startswith("#"):
            above -= 1  # the block above: read from its first line down
        if not text:
            text = [
                comments[n]
                for n in range(above + 1, number)
                if not comments[n].startswith("---")  # a section's title, not the field's
            ]
        found[match[1]] = " ".join(text)
    return found
