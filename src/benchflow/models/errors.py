"""Outcomes a model can declare, importable without torch."""


class ModelSkipped(Exception):
    """The model says this job cannot run (recorded as status=skipped, with the reason)."""


class MissingDependency(RuntimeError):
    """The model needs a package or a download this machine does not have (status=failed)."""
