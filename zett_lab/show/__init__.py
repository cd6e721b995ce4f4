"""Show: plots, notebook widgets, the report and the command line.

Plots and the report display results they are given; widgets call :mod:`zett_lab.study`; only
:mod:`zett_lab.show.cli` wires the stages together.
"""
