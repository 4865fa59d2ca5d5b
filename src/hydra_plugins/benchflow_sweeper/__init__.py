"""benchflow's Hydra sweeper plugin (Hydra finds plugins in the hydra_plugins namespace)."""
