"""Study: grids and sweeps of replays, proven reuse and exact decision boundaries, recommendations.

Builds on load, summarizers, replay and measure; returns :class:`~zett_lab.study.sweep.Sweep`
results and plain DataFrames for :mod:`zett_lab.show` to display.
"""
