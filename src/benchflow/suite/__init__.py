"""Suites: PyTorch's torchbench.yaml mirrored as Hydra config, and its rules applied."""
