"""Progress of long work: a tqdm bar with an ETA (terminal or notebook), or a function of your own."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Seconds of work before a terminal bar appears: quick commands leave stderr clean.
TERMINAL_DELAY_S = 1.0


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """How far a piece of work is: what a ``progress=`` function receives after each step."""

    done: int
    #: None when the amount of work is not known in advance.
    total: int | None
    #: Where the last step ran (``host:pid``), None when it needed no worker.
    worker: str | None
    elapsed_s: float


class Progress:
    """Counts work done; shows it as a tqdm bar (``show=True``), calls a function, or stays silent.

    ``tqdm.auto`` picks the bar: in a Jupyter kernel the ipywidgets bar, shown at once (tqdm
    checks a delay only when a step ends, so a delayed widget would stay hidden through a long
    first step); in a terminal the text bar on stderr, shown once the work takes more than
    :data:`TERMINAL_DELAY_S`. Both show done/total, the rate and the time left.
    """

    def __init__(
        self, total: int | None, label: str, show: bool | Callable[[ProgressEvent], None], unit: str = "cell"
    ) -> None:
        self.total, self.done = total, 0
        self.started = time.perf_counter()
        self._call = show if callable(show) else None
        self._bar: Any = None
        if show is True:
            from tqdm.auto import tqdm

            in_notebook = any(base.__module__ == "tqdm.notebook" for base in tqdm.__mro__)
            delay = 0.0 if in_notebook else TERMINAL_DELAY_S
            self._bar = tqdm(total=total, desc=label, unit=unit, delay=delay)

    @property
    def watched(self) -> bool:
        """Something shows or receives the progress (a bar or a function)."""
        return self._bar is not None or self._call is not None

    def advance(self, count: int, worker: str | None = None) -> None:
        self.done += count
        if self._bar is not None:
            self._bar.update(count)
        if self._call is not None:
            self._call(ProgressEvent(self.done, self.total, worker, time.perf_counter() - self.started))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
