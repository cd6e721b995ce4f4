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

  // Each cell is its JSON, gzip-compressed and base64-encoded: unpacked when first shown, then kept.
  var unpacked = {};
  function cellData(key) {
    var packed = data.cells[key];
    if (packed === undefined) { return Promise.resolve(null); }
    if (!unpacked[key]) {
      var binary = atob(packed);
      var bytes = new Uint8Array(binary.length);
      for (var i = 0; i < binary.length; i++) { bytes[i] = binary.charCodeAt(i); }
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      unpacked[key] = new Response(stream).text().then(JSON.parse);
    }
    return unpacked[key];
  }

  function show(key, cell) {
    if (!cell) {
      figure.textContent = "No replay for this setting (keep_recent_tokens must be below max_tokens).";
      status.textContent = "";
      fill("zl-explore-steps", data.step_columns, []);
      fill("zl-explore-compactions", data.compaction_columns, []);
    } else {
      figure.innerHTML = cell.svg;
      status.textContent = cell.status;
      fill("zl-explore-steps", data.step_columns, stepRows(cell));
      fill("zl-explore-compactions", data.compaction_columns, cell.compactions);
    }
    figure.setAttribute("data-cell", key);
  }

  var shown = 0;
  // A column of the step table: {d: differences of whole numbers} or {v: texts, c: each row's text}.
  function columnTexts(column, n) {
    var out = new Array(n), i;
    if (column.d) {
      var total = 0;
      for (i = 0; i < n; i++) {
        total += column.d[i];
        out[i] = String(total).replace(/\B(?=(\d{3})+(?!\d))/g, ",");  // as formatting.count writes it
      }
    } else {
      for (i = 0; i < n; i++) { out[i] = column.v[column.c[i]]; }
    }
    return out;
  }

  function stepRows(cell) {
    var columns = cell.steps.map(function (column) { return columnTexts(column, cell.rows); });
    var rows = new Array(cell.rows);
    for (var i = 0; i < cell.rows; i++) {
      rows[i] = columns.map(function (texts) { return texts[i]; });
    }
    return rows;
  }

  function render() {
    var key = selects.s.value + "|" + selects.m.value + "|" + selects.k.value;
    var ticket = ++shown;
    if (typeof DecompressionStream === "undefined") {
      figure.textContent = "This browser cannot unpack the explorer's data (it needs DecompressionStream: a browser from 2023 on); the report's JSON format holds the same figures.";
      return Promise.resolve();
    }
    return cellData(key).then(function (cell) {
      if (ticket === shown) { show(key, cell); }  // a later choice wins
    }, function (error) {
      figure.textContent = "The explorer's data could not be read: " + error;
    });
  }

  Object.keys(selects).forEach(function (name) {
    selects[name].addEventListener("change", render);
    selects[name].addEventListener("input", render);
  });
  render().then(function () {
    document.documentElement.setAttribute("data-zl-ready", "1");
  });
})();
