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
      if (column.title) { th.title = column.title; th.classList.add("term"); }
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
    var count = document.getElementById(id + "-count");
    if (count) { count.textContent = rows.length.toLocaleString("en-US"); }
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
