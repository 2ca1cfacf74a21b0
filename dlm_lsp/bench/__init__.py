"""Benchmarks: fixed task sets, fixed seeds, numbers for the README."""
