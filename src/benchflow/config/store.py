"""Registers the schema with Hydra's ConfigStore (conf/config.yaml names it in defaults)."""

from __future__ import annotations

from pathlib import Path

from hydra.core.config_store import ConfigStore

from benchflow.config.schema import BenchConfig

CONF_DIR = Path(__file__).resolve().parents[3] / "conf"


def register(torchbench_root: str | None = None) -> None:
    """The schema, plus a `model` group option for every TorchBench model found.

    So `model=<any TorchBench model>` composes with no YAML file per model, and
    Hydra's "available options" for an unknown model list them too.
    """
    cs = ConfigStore.instance()
    cs.store(name="benchflow_schema", node=BenchConfig)
    from benchflow.models.torchbench_index import TorchBenchNotFound, find_root, list_models

    try:
        root = find_root(torchbench_root)
    except TorchBenchNotFound:
        return  # validation reports it, naming the key
    if root is None:
        return
    own = {p.stem for p in (CONF_DIR / "model").glob("*.yaml")}
    for name in list_models(root):
        if name not in own:
            cs.store(group="model", name=name, node={"name": name, "source": "torchbench"})
