"""Dynamo + AOTAutograd with eager kernels: compiler front end without code generation."""

from benchflow.backends.base import DynamoBackend, register


@register
class AotEager(DynamoBackend):
    label = "aot_eager"
    dynamo = "aot_eager"
    summary = "dynamo + AOTAutograd, eager kernels"
