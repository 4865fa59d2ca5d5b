"""The suites PyTorch's benchmarks/dynamo tracks, each defined once: which upstream
files it mirrors, where its mirror lives, and what builds its models.

Nothing here imports torch, transformers or timm: the parent plans, lists and
registers models from the mirrors alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchflow.config.schema import SUITE_MODEL_SOURCES
from benchflow.config.store import CONF_DIR


@dataclass(frozen=True)
class Suite:
    name: str  # suite=<name>; its mirror is conf/suite/<name>.yaml
    upstream: str  # the file in PyTorch's benchmarks/dynamo that the mirror copies
    models_list: str | None  # the list of models and batch sizes beside it, if any
    list_separator: str | None  # between a name and its batch size in that list
    # model.source of the models the list names; None: the models come from elsewhere
    # (TorchBench's from a checkout)
    source: str | None
    package: str | None  # what building its models imports (in the child only)

    @property
    def mirror(self) -> Path:
        return CONF_DIR / "suite" / f"{self.name}.yaml"


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


def rules(suite: Suite) -> dict[str, Any]:
    """The mirror's rules (conf/suite/<name>.yaml)."""
    data = yaml.safe_load(suite.mirror.read_text())
    return data["rules"] if isinstance(data, dict) else {}


def model_names(suite: Suite) -> list[str]:
    """The models of a suite with a models list, in the list's order (the mirror keeps the
    list's batch sizes under batch_size.inference)."""
    return list((rules(suite).get("batch_size") or {}).get("inference") or {})


def register_suite_models() -> None:
    """Every suite model as a `model` option with its source, so `model=BertForMaskedLM`
    composes with no YAML file per model."""
    from benchflow.config.store import register

    for suite in SUITES.values():
        if suite.source and suite.mirror.is_file():
            # Hydra reads `/` in an option as a folder: the Hub-checkpoint entries
            # (`meta-llama/Llama-3.2-1B`) cannot be options, nor be built offline anyway.
            names = [n for n in model_names(suite) if "/" not in n]
            register(names, source=suite.source)
