"""Launchers for runs beyond one local process (see launch/README.md)."""
