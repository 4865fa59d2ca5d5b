"""The parent side of a sweep: its plan, its one loop, its rows, MLflow runs and report."""
