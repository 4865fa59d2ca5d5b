"""Dynamo + CUDA graph replay: CUDA only."""

from benchflow.backends.base import DynamoBackend, register


@register
class Cudagraphs(DynamoBackend):
    label = "cudagraphs"
    dynamo = "cudagraphs"
    summary = "dynamo + CUDA graphs replay"
    accelerators = ("cuda",)
