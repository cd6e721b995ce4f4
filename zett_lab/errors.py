"""The one exception family zett_lab raises for bad input and bad settings."""


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
