// The alerts page: the filters' URL drops empty fields (a short permalink), and each list's
// downloads give exactly the rows it lists.
(function () {
  "use strict";

  const form = document.getElementById("alerts-form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams(new FormData(form));
    for (const [key, value] of [...params]) if (value === "") params.delete(key);
    const query = params.toString();
    window.location.assign(query ? `?${query}` : window.location.pathname);
  });

  const data = fedprobe.data("alerts-data");
  if (!data) return;
  const group = ["vantage_point", "endpoint", "endpoint_name", "site", "site_name", "protocol",
    "method", "pattern", "read_size", "fraction", "clients"];
  const lists = {
    failing: group.concat(["run", "status", "error_class", "error_message", "last_at",
      "failing_since", "failures", "last_good_at"]),
    slower: group.concat(["metric", "unit", "night", "latest", "baseline", "baseline_runs",
      "change", "run"]),
  };
  for (const [name, columns] of Object.entries(lists)) {
    const rows = () => data[name].map((item) => {
      const row = {};
      for (const key of columns) row[key] = item[key];
      return row;
    });
    fedprobe.downloads(document.getElementById(`${name}-card`), `alerts-${name}`, rows, columns);
  }
})();
