"""Result rows: their schema, provenance, files and summaries."""
