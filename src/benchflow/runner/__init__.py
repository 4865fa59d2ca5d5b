"""Isolation: each job in a fresh child process, bounded by a hard timeout."""
