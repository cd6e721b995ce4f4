"""Sphinx configuration of the documentation site: ``make docs`` builds it into ``build/docs/html/``.

Strict: ``sphinx-build -W --keep-going -n`` turns every warning (a broken reference, a notebook
cell that fails or writes to stderr, a page outside the table of contents) into a failed build.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]

import zett_lab  # noqa: E402  (after the path is set)

project = "zett_lab"
author = "zett_lab contributors"
copyright = "zett_lab contributors"
version = release = zett_lab.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "zett_lab_docs",
]
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"zett_lab {release}"
html_static_path: list[str] = []
html_show_sourcelink = False

# --- API reference from the docstrings ---------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # dataclass fields are documented once, from the "Attributes:" section
# Their types stay in the signature: taken from annotations, a bare name (``Comparison``) can mean two classes.
napoleon_attr_annotations = False
# References are checked (-n); names outside zett_lab have no inventory offline, so they are not.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(?!zett_lab\b).*"),
]

# --- notebooks: executed at build time, offline ------------------------------------------------
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_output_stderr = "error"
# No widget JavaScript from anywhere: a widget shows its static HTML snapshot on the site.
nb_ipywidgets_js: dict[str, dict[str, str]] = {}
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]

# The kernels that execute the notebooks inherit the environment zett_lab_docs sets up: no provider
# key, a scratch summary cache and output folder, warnings off as in the tests.
