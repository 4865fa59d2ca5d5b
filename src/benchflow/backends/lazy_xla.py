"""Lazy XLA: eager module code traced on the XLA device; each step's graph is compiled
by XLA and run through PJRT (`dynamo=none xla=PJRT`)."""

from benchflow.backends.base import Backend, register


@register
class LazyXla(Backend):
    label = "lazy_xla"
    dynamo = "none"
    summary = "lazy XLA tracing on the PJRT device (dynamo=none xla=PJRT)"
    on_xla = True
    auto = False  # dynamo=none with xla=auto is plain eager
