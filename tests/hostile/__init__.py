"""Hostile-input corpus, built by code (see build.py): never hand-edited binaries."""
