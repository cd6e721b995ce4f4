"""Imported once by the default pool's fork server (:data:`~zett_lab.study.executors.PRELOAD`): loads the
o200k vocabulary there, so every worker forked from it starts with the vocabulary in memory instead
of loading it (most of a second) before its first cell."""

from __future__ import annotations

from .executors import warm_worker

warm_worker()
