"""Dynamo graphs compiled by XLA and run on the PJRT device."""

from typing import Any

from benchflow.backends.base import DynamoBackend, register
from benchflow.config.schema import DynamoConfig


@register
class OpenXla(DynamoBackend):
    label = "openxla"
    dynamo = "openxla"
    summary = "dynamo graphs compiled by XLA (PJRT)"
    on_xla = True

    @classmethod
    def prepare(cls, module: Any, dynamo: DynamoConfig) -> Any:
        import torch_xla  # noqa: F401  registers the openxla dynamo backend

        return super().prepare(module, dynamo)
