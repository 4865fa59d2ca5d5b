"""benchflow: declarative, Hydra-driven orchestration of PyTorch performance runs."""

__version__ = "0.1.0"
