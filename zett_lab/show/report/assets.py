"""The report page's stylesheet and script (``templates/report.css``, ``templates/report.js``) and its CSP.

The script only reads the explorer's JSON data block and builds DOM nodes with
``textContent``; the one ``innerHTML`` it sets is a timeline SVG that zett_lab drew from
numbers (no conversation text reaches it). The page's Content-Security-Policy allows this
script by its SHA-256 hash and nothing else, so an injected script or event handler could
not run even if escaping failed. Inline elements, which hold the text that comes from conversations,
summaries and settings, isolate their bidirectional text (``unicode-bidi: isolate``), so a
right-to-left override (U+202E) in that text cannot reorder the page text around it.
"""

from __future__ import annotations

import base64
import hashlib
from importlib.resources import files


def _template_file(name: str) -> str:
    return (files(__package__) / "templates" / name).read_text(encoding="utf-8").strip()


#: The page's inline stylesheet (no web fonts, no ``url()``).
CSS = _template_file("report.css")

#: The page's one inline script: the explorer over the precomputed grid (no libraries, no network).
JS = _template_file("report.js")


def script_hash(script: str = JS) -> str:
    """The CSP source expression allowing exactly this inline script."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def content_security_policy() -> str:
    """No network at all: nothing may be fetched; only the report's own script may run."""
    return (
        "default-src 'none'; "
        f"script-src {script_hash()}; "
        "style-src 'unsafe-inline'; "
        "img-src data:; "
        "base-uri 'none'; form-action 'none'"
    )
