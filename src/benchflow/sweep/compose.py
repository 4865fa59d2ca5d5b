"""A sweep's jobs composed fast, with Hydra's semantics.

Hydra composes every job from scratch: its defaults list (each group option's file
merged onto the schema), then the job's value overrides (``seed=3``), ~80 ms a job
here. In a grid most jobs differ only in those values. A :class:`Composer` composes each
distinct set of *group* choices (``model=llama dynamo=none``: a *base*) once, through
Hydra's own loader, and applies a job's value overrides after it, as Hydra does:

- :meth:`Composer.typed` (the plan): onto the base's typed BenchConfig, each value
  converted by the schema's own OmegaConf node, then checked (check_values). No
  DictConfig is made per job.
- :meth:`Composer.compose` (the config a job runs with, the launcher's): onto a copy of
  the base with Hydra's own ``_apply_overrides_to_config``, and the hydra node's record
  of the overrides (``hydra.overrides.task``, ``hydra.job.override_dirname``) made as
  Hydra makes it. At most KEEP bases are kept, so memory does not grow with the sweep.

Whatever is not certain to come out the same takes a slower path. An override of a
``hydra.`` key composes the job in full (Hydra's ``load_sweep_config``). For the plan, a
value override that is not a plain ``key=value`` on a leaf of the schema (``+key``,
``~key``, ``++key``, a dict, an interpolation, a key under ``suite.rules``), and a
base holding interpolations, take :meth:`Composer.compose` and are parsed as a config
Hydra composed. Any error in the fast paths is left to the full composition to raise,
so the messages are Hydra's own.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from omegaconf import DictConfig, ListConfig, OmegaConf, ValueNode
from omegaconf.base import Node

from benchflow.config.schema import BenchConfig
from benchflow.config.validate import check_values, parse
from benchflow.config.validate import typed as typed_config

__all__ = ["Composer"]

Groups = tuple[str, ...]  # a job's group overrides, in its order: what its base is composed of


class _Unsure(Exception):
    """An override the typed path cannot apply with certainty."""


class Composer:
    """Composes the jobs of one sweep (`master`: the sweep's config, as Hydra's launcher
    gets it) from a few bases. `counts` says how each job was made: typed, composed
    (a base plus overrides) or full (Hydra's composition)."""

    # Composed bases kept, ~0.7 MB each (45 MB at most); a typed base is kept for every
    # one. A sweep's plan composes each base, then its launcher each job from its base:
    # with fewer kept than the sweep has bases (a `+case=NAME` per job, or a grid of
    # models x backends), every base was composed twice (65 cases: 64 compositions
    # more, ~0.3 CPU-s each).
    KEEP = 64

    def __init__(self, loader: Any, master: DictConfig, keep: int = KEEP) -> None:
        self.loader = loader
        self.master = master
        self.keep = keep
        self.counts: Counter[str] = Counter()
        self.bases_composed = 0  # by Hydra's loader (_base)
        self._parser = OverridesParser.create()
        self._parsed: dict[str, Override] = {}
        self._repo: Any = None
        self._groups: dict[str, bool] = {}  # key -> is it a config group (the repo's answer)
        self._composed: OrderedDict[Groups, DictConfig] = OrderedDict()
        self._typed: dict[Groups, BenchConfig | None] = {}
        self._schema = OmegaConf.structured(BenchConfig)
        self._leaves: dict[str, Node | None] = {}  # dotted key -> the schema's node

    # --- the plan: a checked BenchConfig per job ---------------------------------------

    def typed(self, overrides: Sequence[str]) -> BenchConfig:
        """``parse(load_sweep_config(master, overrides))``: the job's config, parsed and
        checked. Raises ConfigError as parse does, and Hydra's own errors."""
        try:
            cfg = self._fast_typed(overrides)
        except Exception:  # anything uncertain: the composed path says what is wrong
            cfg = None
        if cfg is None:
            return parse(self.compose(overrides))
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
        """The base's BenchConfig, types checked (not values: each job's are), or None
        where a job's values could change more than their own keys (interpolations)
        or where the base alone does not parse (a job's override may complete it)."""
        if groups not in self._typed:
            base = self._base(groups)
            found = None
            if not _interpolates(base):
                try:
                    found = typed_config(base)
                except Exception:
                    found = None
            self._typed[groups] = found
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
        """The schema's node for `key` where it is a leaf a value is set on: a field
        holding a value or a list (not a section, nor a key inside a free-form mapping
        such as suite.rules); else None."""
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

    # --- the launcher: a job's DictConfig, as Hydra composes it -------------------------

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        """``load_sweep_config(master, overrides)``, from the job's base."""
        try:
            split = self._split(overrides)
            if split is not None:
                cfg = self._apply(split[0], split[1], overrides)
                self.counts["composed"] += 1
                return cfg
        except Exception:  # Hydra's own composition raises its own error
            pass
        self.counts["full"] += 1
        composed: DictConfig = self.loader.load_sweep_config(self.master, list(overrides))
        return composed

    def _apply(
        self, groups: Groups, values: list[Override], overrides: Sequence[str]
    ) -> DictConfig:
        cfg = copy.deepcopy(self._base(groups))
        ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
        # What the base's composition recorded of its overrides, for all the job's.
        task = [o for o in map(self._parse, overrides) if not o.is_hydra_override()]
        cfg.hydra.overrides.task = [o.input_line for o in task]
        dirname = cfg.hydra.job.config.override_dirname
        cfg.hydra.job.override_dirname = get_overrides_dirname(
            overrides=task,
            kv_sep=dirname.kv_sep,
            item_sep=dirname.item_sep,
            exclude_keys=list(dirname.exclude_keys),
        )
        OmegaConf.copy_cache(from_config=self.master, to_config=cfg)  # as load_sweep_config
        return cfg

    # --- bases ----------------------------------------------------------------------------

    def _base(self, groups: Groups) -> DictConfig:
        """The config Hydra composes for the group overrides alone (a few are kept)."""
        found = self._composed.get(groups)
        if found is None:
            self.bases_composed += 1
            found = self.loader.load_sweep_config(self.master, list(groups))
            self._composed[groups] = found
            if len(self._composed) > self.keep:
                self._composed.popitem(last=False)
        else:
            self._composed.move_to_end(groups)
        return found

    def _split(self, overrides: Sequence[str]) -> tuple[Groups, list[Override]] | None:
        """A job's overrides as Hydra's defaults list sorts them: group overrides (its
        base) and value overrides, each in the job's order. None: a `hydra.` key or a
        sweep (compose the job in full)."""
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
        if self._repo is None:
            # The repository the sweep's compositions search: benchflow's tree, the
            # user's --config-dir folders and hydra.searchpath, as Hydra builds it.
            hydra_overrides = list(self.master.hydra.overrides.hydra)
            _, self._repo = self.loader._parse_overrides_and_create_caching_repo(
                self.master.hydra.job.config_name, hydra_overrides
            )
        if key not in self._groups:
            self._groups[key] = bool(self._repo.group_exists(key))
        return self._groups[key]


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
