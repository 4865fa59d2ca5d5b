"""Backends: how a model is prepared for a device/compiler, and how that device is synchronized."""
