"""Configuration: the structured schema, its registration, and validation at the edge."""
