"""zett-lab's version number: its one home (the package metadata, ``zett_lab.__version__`` and
``zett-lab --version`` all read it)."""

__version__ = "0.2.0.dev0"
