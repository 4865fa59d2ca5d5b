"""A sweep's jobs, each composed and typed fast, with Hydra's semantics.

Hydra composing every job from scratch takes minutes for a large sweep, and most jobs
of a grid differ only in values: a :class:`Composer` composes each set of group choices
(a *base*) once, then applies a job's values to its typed BenchConfig through the
schema's own nodes. Anything less certain, and any error, takes Hydra's composition.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import typing
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from omegaconf import DictConfig, ListConfig, OmegaConf, ValueNode
from omegaconf.base import Node

from benchflow.config.schema import BenchConfig
from benchflow.config.validate import check_values, parse
from benchflow.config.validate import typed as typed_config

Groups = tuple[str, ...]  # a job's group overrides, in its order: what its base is composed of


class _Unsure(Exception):
    """An override the typed path cannot apply with certainty."""


class Composer:
    """Composes and types the jobs of one sweep (`master`: its config) from a few bases;
    `counts` says how many were typed from a base and how many Hydra composed."""

    def __init__(self, loader: Any, master: DictConfig) -> None:
        self.loader = loader
        self.master = master
        self.counts: Counter[str] = Counter()
        self.bases_composed = 0  # by Hydra's loader
        self._parser = OverridesParser.create()
        self._parsed: dict[str, Override] = {}
        self._groups: set[str] | None = None  # the config groups of every searched tree
        self._typed: dict[Groups, BenchConfig | None] = {}
        self._schema = OmegaConf.structured(BenchConfig)
        self._leaves: dict[str, Node | None] = {}  # dotted key -> the schema's node

    def typed(self, overrides: Sequence[str]) -> BenchConfig:
        """``parse(load_sweep_config(master, overrides))``: the job's config, parsed and
        checked. Raises ConfigError as parse does, and Hydra's own errors."""
        try:
            cfg = self._fast_typed(overrides)
        except Exception:  # anything uncertain: Hydra's composition says what is wrong
            cfg = None
        if cfg is None:
            self.counts["full"] += 1
            return parse(self.loader.load_sweep_config(self.master, list(overrides)))
        self.counts["typed"] += 1
        check_values(cfg)  # each job's values, once
        return cfg

    def _fast_typed(self, overrides: Sequence[str]) -> BenchConfig | None:
        split = self._split(overrides)
        if split is None:
            return None
        groups, values = split
        cfg = self._typed_base(groups)
        if cfg is None:
            return None
        for override in values:
            cfg = self._apply_typed(cfg, override)
        return cfg

    def _typed_base(self, groups: Groups) -> BenchConfig | None:
        """The base's BenchConfig, types checked (values are each job's), or None where
        it holds interpolations or does not parse alone."""
        if groups not in self._typed:
            # the config Hydra composes for the group overrides alone
            self.bases_composed += 1
            base = self.loader.load_sweep_config(self.master, list(groups))
            self._typed[groups] = None
            if not _interpolates(base):
                with contextlib.suppress(Exception):
                    self._typed[groups] = typed_config(base)
        return self._typed[groups]

    def _apply_typed(self, cfg: BenchConfig, override: Override) -> BenchConfig:
        """`override` (``key=value``) applied to `cfg` as Hydra's OmegaConf.update and
        parse's merge onto the schema would: the value converted by the key's node."""
        if override.type is not OverrideType.CHANGE or override.package is not None:
            raise _Unsure(override.input_line)
        key = override.key_or_group
        if key not in self._leaves:
            self._leaves[key] = self._leaf(key)
        node = self._leaves[key]
        value = override.value()
        if isinstance(node, ListConfig):
            if type(value) is not list or not all(map(_plain, value)):
                raise _Unsure(override.input_line)
            items = copy.deepcopy(node)
            items.merge_with(value)  # what OmegaConf.update(merge=True) does with a list
            converted: Any = OmegaConf.to_container(items)
        elif isinstance(node, ValueNode):
            if not _plain(value):
                raise _Unsure(override.input_line)
            leaf = copy.deepcopy(node)
            leaf._set_value(value)  # what setting the key does: the node's conversion
            converted = leaf._value()
        else:
            raise _Unsure(override.input_line)
        return _replaced(cfg, key.split("."), converted)

    def _leaf(self, key: str) -> Node | None:
        """The schema's node for `key` where it is a leaf holding a value or a list (not a
        section, nor a key inside a mapping such as suite.rules); else None."""
        cls: Any = BenchConfig
        node: Any = self._schema
        for part in key.split("."):
            if not dataclasses.is_dataclass(cls) or part not in {
                f.name for f in dataclasses.fields(cls)
            }:
                return None
            cls = typing.get_type_hints(cls)[part]
            node = node._get_node(part)
        if dataclasses.is_dataclass(cls) or typing.get_origin(cls) is dict:
            return None
        assert isinstance(node, Node)
        return node

    def _split(self, overrides: Sequence[str]) -> tuple[Groups, list[Override]] | None:
        """A job's overrides as Hydra sorts them: its group overrides (its base) and value
        overrides. None: a `hydra.` key or a sweep (compose the job in full)."""
        groups: list[str] = []
        values: list[Override] = []
        for line in overrides:
            override = self._parse(line)
            key = override.key_or_group
            if override.is_sweep_override() or key == "hydra" or key.startswith("hydra."):
                return None
            # Hydra's own rule (defaults_list.Overrides): a dict, or a key that is no group.
            if isinstance(override.value(), dict) or not self._group_exists(key):
                values.append(override)
            else:
                groups.append(line)
        return tuple(groups), values

    def _parse(self, line: str) -> Override:
        found = self._parsed.get(line)
        if found is None:
            found = self._parsed[line] = self._parser.parse_override(line)
        return found

    def _group_exists(self, key: str) -> bool:
        """Is `key` a config group: a folder of a tree Hydra searches (benchflow's, the
        user's --config-dir and hydra.searchpath folders), or a group of the ConfigStore?"""
        if self._groups is None:
            sources = self.master.hydra.runtime.config_sources
            folders = [Path(s.path) for s in sources if s.schema == "file"]
            self._groups = {
                p.name for f in folders if f.is_dir() for p in f.iterdir() if p.is_dir()
            }
            self._groups |= {
                name for name, node in ConfigStore.instance().repo.items() if isinstance(node, dict)
            }
        return key in self._groups


def _plain(value: Any) -> bool:
    """A scalar an override sets as it is: no interpolation, no missing value (???)."""
    if type(value) is str:
        return "${" not in value and value != "???"
    return value is None or type(value) in (int, float, bool)


def _replaced(cfg: Any, path: list[str], value: Any) -> Any:
    """A copy of dataclass `cfg` with the field at `path` set (the rest shared)."""
    head, rest = path[0], path[1:]
    if rest:
        value = _replaced(getattr(cfg, head), rest, value)
    return dataclasses.replace(cfg, **{head: value})


def _interpolates(cfg: DictConfig) -> bool:
    """Does the config's schema part (its `hydra` node left out) hold an interpolation?"""
    return any(_node_interpolates(cfg._get_node(key)) for key in cfg if key != "hydra")


def _node_interpolates(node: Any) -> bool:
    assert isinstance(node, Node)
    if node._is_interpolation():
        return True
    if node._is_none() or node._is_missing():
        return False
    if isinstance(node, DictConfig):
        return any(_node_interpolates(node._get_node(key)) for key in node)
    if isinstance(node, ListConfig):
        return any(_node_interpolates(node._get_node(i)) for i in range(len(node)))
    return False
