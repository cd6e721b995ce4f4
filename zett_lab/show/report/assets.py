"""The report page's inline stylesheet and script (no libraries, no network).

The script only reads the explorer's JSON data block and builds DOM nodes with
``textContent``; the one ``innerHTML`` it sets is a timeline SVG that zett_lab drew from
numbers (no conversation text reaches it). The page's Content-Security-Policy allows this
script by its SHA-256 hash and nothing else, so an injected script or event handler could
not run even if escaping failed.
"""

from __future__ import annotations

import base64
import hashlib

CSS = """
:root{--fg:#1d232b;--muted:#5b6470;--line:#d9dee5;--bg:#fff;--soft:#f5f7fa;--accent:#1f3a68;--good:#228833;--bad:#cc3311}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;\
color:var(--fg);background:var(--bg)}
main{max-width:1180px;margin:0 auto;padding:24px 28px 64px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:36px 0 10px;padding-top:8px;border-top:2px solid var(--line)}
h3{font-size:16px;margin:22px 0 8px}
p,li{max-width:980px}
.meta{color:var(--muted);margin:0 0 14px}
nav.toc{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:8px 14px;margin:12px 0 8px}
nav.toc a{margin-right:14px;white-space:nowrap}
a{color:var(--accent)}
table{border-collapse:collapse;margin:8px 0 14px;font-size:13px}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.scroll{max-height:420px;overflow:auto;border:1px solid var(--line);border-radius:4px;margin:8px 0 14px}
.scroll table{margin:0;border:0}
.scroll thead th{position:sticky;top:0;z-index:1}
.callout{border-left:4px solid var(--good);background:#f1f8f2;padding:10px 14px;margin:12px 0;border-radius:0 6px 6px 0}
.warn{border-left-color:var(--bad);background:#fbf1ef}
.note{color:var(--muted);font-size:13px}
figure{margin:10px 0 18px}
figure svg{max-width:100%;height:auto}
figcaption{color:var(--muted);font-size:13px;margin-top:2px}
.grid2{display:grid;grid-template-columns:repeat(auto-fit,minmax(440px,1fr));gap:12px}
.controls{display:flex;flex-wrap:wrap;gap:16px;align-items:center;\
background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:10px 14px;margin:8px 0}
.controls label{font-weight:600}
.controls select{font:inherit;margin-left:6px;padding:2px 4px}
#zl-explore-figure{min-height:240px}
#zl-explore-figure svg{max-width:100%;height:auto;font-family:system-ui,"DejaVu Sans",sans-serif}
.status{font-weight:600}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;font-size:12.5px}
.value{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;\
font-size:12.5px;overflow-wrap:anywhere;\
min-width:180px;max-width:320px}
table.facts td:first-child{font-weight:600;background:var(--soft);white-space:nowrap}
table.lost td{max-width:340px;overflow-wrap:anywhere}
table.lost details{margin:2px 0}
details summary{cursor:pointer;color:var(--accent)}
pre.summary{white-space:pre-wrap;word-break:break-word;background:var(--soft);border:1px solid var(--line);padding:8px;\
max-height:260px;overflow:auto;font-size:12px}
dl.glossary dt{font-weight:600;margin-top:10px}
dl.glossary dd{margin:2px 0 0 18px;max-width:980px}
footer{margin-top:40px;color:var(--muted);font-size:12px}
@media print{nav.toc,.controls{display:none}.scroll{max-height:none}}
""".strip()

JS = r"""
(function () {
  "use strict";
  var source = document.getElementById("zl-explore-data");
  if (!source) { return; }
  var data = JSON.parse(source.textContent);
  var selects = {
    s: document.getElementById("zl-sel-summarizer"),
    m: document.getElementById("zl-sel-max"),
    k: document.getElementById("zl-sel-keep")
  };
  var figure = document.getElementById("zl-explore-figure");
  var status = document.getElementById("zl-explore-status");

  function fill(id, columns, rows) {
    var table = document.getElementById(id);
    while (table.firstChild) { table.removeChild(table.firstChild); }
    var head = table.createTHead().insertRow();
    columns.forEach(function (column) {
      var th = document.createElement("th");
      th.textContent = column.label;
      if (column.num) { th.className = "num"; }
      head.appendChild(th);
    });
    var body = table.createTBody();
    rows.forEach(function (row) {
      var tr = body.insertRow();
      row.forEach(function (value, i) {
        var td = tr.insertCell();
        td.textContent = value === null ? "" : String(value);
        if (columns[i].num) { td.className = "num"; }
      });
    });
  }

  function render() {
    var key = selects.s.value + "|" + selects.m.value + "|" + selects.k.value;
    var cell = data.cells[key];
    figure.setAttribute("data-cell", key);
    if (!cell) {
      figure.textContent = "No replay for this setting (keep_recent_tokens must be below max_tokens).";
      status.textContent = "";
      fill("zl-explore-steps", data.step_columns, []);
      fill("zl-explore-compactions", data.compaction_columns, []);
      return;
    }
    figure.innerHTML = cell.svg;
    status.textContent = cell.status;
    fill("zl-explore-steps", data.step_columns, cell.steps);
    fill("zl-explore-compactions", data.compaction_columns, cell.compactions);
  }

  Object.keys(selects).forEach(function (name) {
    selects[name].addEventListener("change", render);
    selects[name].addEventListener("input", render);
  });
  render();
  document.documentElement.setAttribute("data-zl-ready", "1");
})();
""".strip()


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
