"""Experiment tracking: MLflow runs for sweeps and jobs."""
