"""The suites PyTorch's benchmarks/dynamo tracks, each defined once: which upstream
files it mirrors, where its mirror lives, and what builds its models.

Nothing here imports torch, transformers or timm: the parent works from the mirrors.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchflow.config.schema import SUITE_MODEL_SOURCES, SuiteConfig, read_yaml

MIRRORS = Path(__file__).parent / "mirrors"


@dataclass(frozen=True)
class Suite:
    name: str  # suite=<name> (conf/suite/<name>.yaml); its mirror is mirrors/<name>.yaml
    upstream: str  # the file in PyTorch's benchmarks/dynamo that the mirror copies
    models_list: str | None  # the list of models and batch sizes beside it, if any
    list_separator: str | None  # between a name and its batch size in that list
    # model.source of the models the list names; None: the models come from elsewhere
    # (TorchBench's from a checkout)
    source: str | None
    package: str | None  # what building its models imports (in the child only)

    @property
    def mirror(self) -> Path:
        return MIRRORS / f"{self.name}.yaml"


SUITES = {
    s.name: s
    for s in (
        Suite("torchbench", "torchbench.yaml", None, None, None, None),
        Suite(
            "huggingface",
            "huggingface.yaml",
            "huggingface_models_list.txt",
            ",",
            "huggingface",
            "transformers",
        ),
        Suite("timm", "timm_models.yaml", "timm_models_list.txt", " ", "timm", "timm"),
    )
}
assert {s.source for s in SUITES.values() if s.source} == set(SUITE_MODEL_SOURCES)


def by_upstream(path: Path) -> Suite | None:
    """The suite whose upstream file `path` is, by its file name."""
    return next((s for s in SUITES.values() if s.upstream == path.name), None)


def by_source(source: str) -> Suite | None:
    """The suite whose own models have model.source=`source`."""
    return next((s for s in SUITES.values() if s.source == source), None)


@functools.cache
def rules(suite: Suite) -> dict[str, Any]:
    """The mirror's rules, read once (one object: never changed in place)."""
    data = read_yaml(suite.mirror.read_text())
    return data["rules"] if isinstance(data, dict) else {}


def with_rules(suite: SuiteConfig) -> SuiteConfig:
    """The job's suite with its mirror's rules, any the config gives merged over them (as
    Hydra merges an override into a mapping: mappings key by key, the rest replaced).
    Hydra composes only a suite's name: its rules, about 250 lines for TorchBench, took
    a third of each composition."""
    if (known := SUITES.get(suite.name)) is None:  # builtin, or a user's own suite file
        return suite
    mirrored = rules(known)
    return dataclasses.replace(
        suite, rules=_merged(mirrored, suite.rules) if suite.rules else mirrored
    )


def _merged(base: Any, over: Any) -> Any:
    if not (isinstance(base, dict) and isinstance(over, dict)):
        return over
    return {**base, **{k: _merged(base.get(k), v) for k, v in over.items()}}


def models_in(suite_rules: dict[str, Any]) -> list[str]:
    """The models of a suite with a models list, in the list's order, from its rules (the
    mirror keeps the list's batch sizes under batch_size.inference)."""
    return list((suite_rules.get("batch_size") or {}).get("inference") or {})


def model_names(suite: Suite) -> list[str]:
    """The models of a suite with a models list, read from its mirror."""
    return models_in(rules(suite))


def named(args: Sequence[str]) -> list[Suite]:
    """The suites with models of their own that a command line chooses (`suite=timm`)."""
    chosen = {v.strip() for a in args if a.startswith("suite=") for v in a[6:].split(",")}
    return [s for s in SUITES.values() if s.name in chosen and s.source]


def register_suite_models(args: Sequence[str]) -> None:
    """The models of each suite the command line chooses as `model` options with their
    source (only those: `--help` stays the default suite's)."""
    from benchflow.config.store import register

    for suite in named(args):
        # Hydra reads `/` in an option as a folder: the Hub-checkpoint entries
        # (`meta-llama/Llama-3.2-1B`) cannot be options, nor be built offline anyway.
        names = [n for n in model_names(suite) if "/" not in n]
        register(names, source=suite.source or "")


def unchosen_suite_model(args: Sequence[str]) -> str | None:
    """An error for `model=<a huggingface or timm model>` without its `suite=`, whose
    models are options only when it is chosen (Hydra would only say it found none)."""
    chosen = {s.name for s in named(args)}
    models = {v.strip() for a in args if a.startswith("model=") for v in a[6:].split(",")}
    for suite in SUITES.values():
        if suite.source and suite.name not in chosen:
            for name in sorted(models & set(model_names(suite))):
                return f"model={name} is a {suite.name} model; allowed: add suite={suite.name}"
    return None
