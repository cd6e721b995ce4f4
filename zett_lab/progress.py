"""Progress of long work: a tqdm bar with an ETA (terminal or notebook), or a function of your own."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """How far a piece of work is: what a ``progress=`` function receives after each step."""

    done: int
    total: int
    #: Where the last step ran (``host:pid``), None when it needed no worker.
    worker: str | None
    elapsed_s: float


class Progress:
    """Counts work done; shows it as a tqdm bar (``show=True``), calls a function, or stays silent.

    The bar appears only when the work takes more than a second (``tqdm.auto`` picks the
    notebook widget or the terminal bar) and shows the rate and the time left.
    """

    def __init__(
        self, total: int, label: str, show: bool | Callable[[ProgressEvent], None], unit: str = "cell"
    ) -> None:
        self.total, self.done = total, 0
        self.started = time.perf_counter()
        self._call = show if callable(show) else None
        self._bar: Any = None
        if show is True:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=label, unit=unit, delay=1.0)

    def advance(self, count: int, worker: str | None = None) -> None:
        self.done += count
        if self._bar is not None:
            self._bar.update(count)
        if self._call is not None:
            self._call(ProgressEvent(self.done, self.total, worker, time.perf_counter() - self.started))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
