"""Study: grids and sweeps of replays, proven reuse, forks and exact decision boundaries, recommendations.

Builds on load, summarizers, replay and measure; returns :class:`Sweep` results and plain
DataFrames for :mod:`zett_lab.show` to display. The modules, in the order a sweep uses them:

- :mod:`~zett_lab.study.grid`: settings (tokens or fractions of a model's window), engines and cells;
- :mod:`~zett_lab.study.regions`: which settings provably give the same replay, or the same
  replay up to a turn; :mod:`~zett_lab.study.boundaries`: the exact values where decisions change;
- :mod:`~zett_lab.study.reuse`: proven replays kept per process, and where a replay can fork;
- :mod:`~zett_lab.study.plan`: a sweep's grid checked and cut into units; :mod:`~zett_lab.study.units`: one unit
  of work, as a worker runs it;
- :mod:`~zett_lab.study.executors`: in-process, the local process pool, ``dask.distributed``;
- :mod:`~zett_lab.study.sweep`: the driver, which runs the plan and collects it (:mod:`~zett_lab.study.collect`);
  :mod:`~zett_lab.study.results` and
  :mod:`~zett_lab.study.sources`: the :class:`Sweep` result, with replays' tables on disk;
- :mod:`~zett_lab.study.choose`: measured cells, the Pareto front, constraints;
- :mod:`~zett_lab.study.recommendation`: one recommended setting (constraints first, then the objectives in
  order, checked out of sample; the rule applied in :mod:`~zett_lab.study.ranking`), with its verdict in words
  (:mod:`~zett_lab.study.verdict`); :mod:`~zett_lab.study.alerts`: what a reader must know first;
- :mod:`~zett_lab.study.compare`: :func:`compare` of summarizers, engines and production summaries
  (:mod:`~zett_lab.study.production`: their spans summarized by baselines), one :class:`Comparison`.
"""

from ..progress import ProgressEvent
from .boundaries import Boundaries, decision_boundaries
from .choose import Constraint, ConstraintCheck, NoFeasibleSetting, measured_cells, pareto_front, parse_constraints
from .compare import Comparison, compare
from .executors import SerialExecutor, default_executor, shutdown_default_executor
from .grid import CONTEXT_WINDOWS, SETTING_COLUMNS, STOCK_ENGINE, Cell, resolve_context_window
from .ranking import Alternative, HeldOut, Ranked
from .recommendation import DEFAULT_CONSTRAINTS, DEFAULT_OBJECTIVES, Recommendation, recommend
from .regions import Region, derive, prefix_regions, region, same_replay
from .results import Sweep, SweepConfig
from .reuse import clear_worker_state
from .store import SweepStore, check_sweep_target
from .sweep import sweep

__all__ = [
    "CONTEXT_WINDOWS",
    "DEFAULT_CONSTRAINTS",
    "DEFAULT_OBJECTIVES",
    "SETTING_COLUMNS",
    "STOCK_ENGINE",
    "Alternative",
    "Boundaries",
    "Cell",
    "Comparison",
    "Constraint",
    "ConstraintCheck",
    "HeldOut",
    "NoFeasibleSetting",
    "ProgressEvent",
    "Ranked",
    "Recommendation",
    "Region",
    "SerialExecutor",
    "Sweep",
    "SweepConfig",
    "SweepStore",
    "check_sweep_target",
    "clear_worker_state",
    "compare",
    "decision_boundaries",
    "default_executor",
    "derive",
    "measured_cells",
    "pareto_front",
    "parse_constraints",
    "prefix_regions",
    "recommend",
    "region",
    "resolve_context_window",
    "same_replay",
    "shutdown_default_executor",
    "sweep",
]
