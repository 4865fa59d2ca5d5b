"""`benchflow history`: the same jobs over many sweeps, and where their times changed."""
