"""Registers the schema with Hydra's ConfigStore (conf/config.yaml names it in defaults)."""

from __future__ import annotations

from pathlib import Path

from hydra.core.config_store import ConfigStore

from benchflow.config.schema import BenchConfig

CONF_DIR = Path(__file__).resolve().parents[3] / "conf"


def register() -> None:
    ConfigStore.instance().store(name="benchflow_schema", node=BenchConfig)
