"""The one exception family zett_lab raises for bad input and bad settings, and its warnings."""


class ZettLabError(Exception):
    """A user-facing error: the message names the file and place, or the setting, that is wrong."""


class InputError(ZettLabError, ValueError):
    """A recorded conversation or side file that cannot be read as what it claims to be."""

    def __init__(self, path: object, where: str | None, problem: str) -> None:
        self.path = str(path)
        self.where = where
        self.problem = problem
        location = f"{self.path}: {where}" if where else self.path
        super().__init__(f"{location}: {problem}")


class SettingError(ZettLabError, ValueError):
    """A replay, sweep or summarizer setting that is out of range."""


class OutputError(InputError):
    """An output path zett_lab refuses to write: one of the inputs, or an existing file not to be replaced."""


class ResultFailure(ZettLabError):
    """Part of the work failed (a summary, a replay, a sweep cell) and a strict run stopped there,
    or nothing succeeded at all; the command line exits 1 for it, not 2 as for bad input."""


class ZettLabWarning(UserWarning):
    """The category of every warning zett_lab gives (filter them with ``warnings.filterwarnings``)."""


class SummaryFailureWarning(ZettLabWarning):
    """Summaries failed: the results hold no measurement for them (one warning per distinct cause)."""


class SettingWarning(ZettLabWarning):
    """A setting the engine accepts but that does not do what its name suggests."""
