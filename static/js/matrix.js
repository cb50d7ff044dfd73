// The matrix page: the controls apply as they change (the URL, without empty fields, is the
// permalink; empty good/bad take the metric's saved or default thresholds, shown as their
// placeholders), and the downloads give exactly the cells the table draws. The table itself is
// rendered by the server, so names are text and the page works without JavaScript.
(function () {
  "use strict";

  const form = document.getElementById("matrix-form");
  const data = fedprobe.data("matrix-data");

  function show() {
    const params = new URLSearchParams(new FormData(form));
    for (const [key, value] of [...params]) if (value === "") params.delete(key);
    const query = params.toString();
    window.location.assign(query ? `?${query}` : window.location.pathname);
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    show();
  });
  form.addEventListener("change", (event) => {
    if (event.target.name === "metric") {
      // Boundaries are in the metric's unit: they do not carry over to another metric.
      form.elements.good.value = "";
      form.elements.bad.value = "";
    }
    if (event.target.tagName === "SELECT") show();
  });

  const card = document.getElementById("matrix-card");
  if (!data || !card) return;
  if (data.thresholds.source !== "address") {
    // Empty boundaries mean the metric's thresholds: show which, as the fields' hint.
    form.elements.good.placeholder = `${data.thresholds.good} (${data.thresholds.source})`;
    form.elements.bad.placeholder = `${data.thresholds.bad} (${data.thresholds.source})`;
  }
  const columns = data.view === "site-protocol"
    ? ["site", "site_name", "protocol", "metric", "unit", "value", "rating", "pairs",
       "measured", "failed_pairs", "last_good_at", "since_good_s"]
    : ["vantage_point", "endpoint", "endpoint_name", "site", "site_name", "protocol", "metric",
       "unit", "value", "rating", "value_run", "value_status", "value_at", "last_run",
       "last_status", "last_at", "failed", "error_class", "last_good_at", "since_good_s"];
  const rows = () => data.cells.map((cell) => {
    const row = {};
    for (const key of columns) row[key] = cell[key];
    row.metric = data.metric;
    row.unit = data.unit;
    return row;
  });
  const basename = `matrix-${data.metric}-${data.view}`;
  fedprobe.downloads(card, basename, rows, columns);
})();
