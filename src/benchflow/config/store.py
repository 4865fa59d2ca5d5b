"""Registers the schema with Hydra's ConfigStore (conf/config.yaml names it in defaults)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hydra.core.config_store import ConfigStore

from benchflow.config.schema import BenchConfig

CONF_DIR = Path(__file__).resolve().parents[3] / "conf"


def register(models: Iterable[str] = (), source: str = "torchbench") -> None:
    """The schema, plus a `model` group option for each of `models` without a YAML file
    here, with model.source=`source`: TorchBench's (found by
    benchflow.models.torchbench_index.register_torchbench) or a suite's (huggingface,
    timm: benchflow.suite.suites.register_suite_models).

    So `model=<any TorchBench model>` composes with no YAML file per model, and
    Hydra's "available options" for an unknown model list them too.
    """
    cs = ConfigStore.instance()
    cs.store(name="benchflow_schema", node=BenchConfig)
    own = {p.stem for p in (CONF_DIR / "model").glob("*.yaml")}
    for name in models:
        if name not in own:
            cs.store(group="model", name=name, node={"name": name, "source": source})
