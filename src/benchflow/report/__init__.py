"""Reports over sweeps: per-model tables, HUD-style summaries, plots and a regression gate."""
