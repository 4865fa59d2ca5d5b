"""Dynamo's own `eager` backend: graphs captured, run by eager kernels (a graph-break check).
Labelled `dynamo_eager` so that it never collides with plain eager."""

from benchflow.backends.base import DynamoBackend, register


@register
class DynamoEager(DynamoBackend):
    label = "dynamo_eager"
    dynamo = "eager"
    summary = "dynamo capture with no compiler (graph-break check)"
