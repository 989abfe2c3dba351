"""Benchmarks: each prints its figures as ratios against a ceiling measured in the same run."""
