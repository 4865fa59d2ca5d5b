"""The two ways a config is refused (torch-free, import-free)."""


class ConfigError(ValueError):
    """A bad value: the run must not start."""


class InvalidCombination(ConfigError):
    """Two valid values that cannot go together; in a sweep the job is recorded as
    `invalid` (it stands for no configuration) and the others run."""
