"""The parent side of a sweep: Hydra task function, callbacks and progress display."""
