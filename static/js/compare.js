// The compare page: one line per endpoint over time (daily or weekly median, interquartile
// band, the runs themselves for short ranges) and a strip of failures below, zoomed together.
// The first data comes with the page (json_script "compare-data"); a changed control asks
// the API (/api/v1/compare/, the same selector) and keeps the controls in the address.
// Names go to Plotly through fedprobe.text only, and to the page through textContent.
(function () {
  "use strict";
  performance.mark("compare:script");  // where the time goes: benches/page_interactive.py

  const form = document.getElementById("compare-form");
  const chart = document.getElementById("compare-chart");
  const strip = document.getElementById("failures-chart");
  const summary = document.getElementById("compare-summary");
  const title = document.getElementById("compare-title");
  const picker = document.getElementById("parameter-set");
  const apiLink = document.getElementById("compare-api-link");
  const PARAMETERS = [
    "operation", "method", "pattern", "read_size", "fraction", "clients", "address_family",
  ];
  const FAILURE_MARKS = {
    failed: { symbol: "x-thin-open", colour: fedprobe.colours.vermillion, label: "failed" },
    timeout: { symbol: "triangle-down", colour: fedprobe.colours.orange, label: "timed out" },
    cancelled: { symbol: "circle-open", colour: fedprobe.colours.muted, label: "cancelled" },
    // The tester's own faults (lost, harness, egress, credential): not the endpoint's.
    "tester-fault": { symbol: "diamond-open", colour: fedprobe.colours.muted, label: "tester fault" },
  };
  const markOf = (row) => (row.tester_fault ? "tester-fault" : row.status);
  // Both charts keep the same left margin (room for the strip's endpoint names), so their
  // time axes line up when they zoom together.
  const LEFT = 210;
  let data = fedprobe.data("compare-data");
  let request = 0;
  let linking = false;

  function parameterLabel(set) {
    const clients = `${set.clients} client${set.clients === 1 ? "" : "s"}`;
    // Reads are most runs: their labels stay as they were; another operation leads.
    const operation = set.operation && set.operation !== "read" ? `${set.operation} · ` : "";
    // A pinned family ends the label (IPv4 and IPv6 of one endpoint side by side).
    const family = set.address_family && set.address_family !== "any" ? ` · IPv${set.address_family}` : "";
    return `${operation}${set.method} · ${set.pattern} · ${fedprobeUnits.size(set.read_size)} reads · ` +
      `fraction ${set.fraction} · ${clients}${family}`;
  }

  function endpointsById() {
    return new Map(data.endpoints.map((e) => [e.id, e]));
  }

  function lineName(endpoint) {
    return `${endpoint.name} (${endpoint.protocol})`;
  }

  /** The columns that say which endpoint a downloaded row is of. */
  function endpointColumns(endpoint) {
    return {
      endpoint_id: endpoint.id,
      endpoint: endpoint.name,
      protocol: endpoint.protocol,
      site: endpoint.site_name,
    };
  }

  // The rows drawn, as the downloads give them.
  function seriesRows() {
    if (!data) return [];
    const endpoints = endpointsById();
    const rows = [];
    for (const series of data.series) {
      const endpoint = endpoints.get(series.endpoint);
      series.t.forEach((t, i) => {
        rows.push({
          ...endpointColumns(endpoint),
          bucket: data.bucket,
          day: t,
          runs: series.n[i],
          q1: series.q1[i],
          median: series.median[i],
          q3: series.q3[i],
          metric: data.metric,
          unit: data.unit,
        });
      });
    }
    return rows;
  }

  function runRows() {
    if (!data || !data.runs_shown) return [];
    const endpoints = endpointsById();
    return data.runs.map((run) => {
      const endpoint = endpoints.get(run.endpoint);
      return {
        run: run.id,
        ...endpointColumns(endpoint),
        vantage_point: run.vantage_point,
        server_version: run.server_version,
        created_at: run.t,
        status: run.status,
        value: run.value,
        metric: data.metric,
        unit: data.unit,
      };
    });
  }

  function failureRows() {
    if (!data) return [];
    const endpoints = endpointsById();
    return data.failures.map((row) => {
      const endpoint = endpoints.get(row.endpoint);
      return {
        ...endpointColumns(endpoint),
        day: row.day,
        status: row.status,
        error_class: row.error_class,
        tester_fault: row.tester_fault,
        runs: row.n,
      };
    });
  }

  function metricTraces() {
    const traces = [];
    const endpoints = endpointsById();
    const unit = fedprobe.text(data.unit);
    const order = data.endpoints.map((e) => e.id);
    const byEndpoint = new Map(data.series.map((s) => [s.endpoint, s]));
    const runs = new Map();
    for (const run of data.runs_shown ? data.runs : []) {
      if (!runs.has(run.endpoint)) runs.set(run.endpoint, []);
      runs.get(run.endpoint).push(run);
    }
    order.forEach((id, index) => {
      const series = byEndpoint.get(id);
      if (!series && !runs.has(id)) return;
      const endpoint = endpoints.get(id);
      const colour = fedprobe.colour(index);
      const group = `endpoint-${id}`;
      const meta = [fedprobe.text(lineName(endpoint)), fedprobe.text(endpoint.site_name)];
      if (series) {
        const band = { x: series.t, mode: "lines", line: { width: 0, color: colour },
          hoverinfo: "skip", showlegend: false, legendgroup: group, type: "scatter" };
        traces.push({ ...band, y: series.q3, name: "q3" });
        traces.push({ ...band, y: series.q1, name: "q1", fill: "tonexty",
          fillcolor: fedprobe.rgba(colour, 0.18) });
        traces.push({
          type: "scatter",
          mode: series.t.length > 120 ? "lines" : "lines+markers",
          x: series.t,
          y: series.median,
          name: meta[0],
          meta,
          legendgroup: group,
          line: { color: colour, width: 2 },
          marker: { color: colour, size: 5 },
          customdata: series.t.map((_, i) => [series.q1[i], series.q3[i], series.n[i]]),
          hovertemplate:
            `%{meta[0]}<br>site %{meta[1]}<br>%{x|%Y-%m-%d}: median %{y:.4g} ${unit}` +
            `<br>quartiles %{customdata[0]:.4g} to %{customdata[1]:.4g}` +
            ` (%{customdata[2]} runs)<extra></extra>`,
        });
      }
      const points = runs.get(id) || [];
      if (points.length) {
        traces.push({
          type: "scatter",
          mode: "markers",
          x: points.map((r) => r.t),
          y: points.map((r) => r.value),
          name: `${meta[0]}: runs`,
          meta,
          legendgroup: group,
          showlegend: false,
          marker: {
            color: colour, size: 6, opacity: 0.55,
            symbol: points.map((r) => (r.status === "partial" ? "diamond-open" : "circle")),
          },
          customdata: points.map((r) => [
            r.id, r.status, fedprobe.text(r.vantage_point), fedprobe.text(r.server_version || "server version not reported"),
          ]),
          hovertemplate:
            `%{meta[0]}<br>run %{customdata[0]} (%{customdata[1]}) from %{customdata[2]}` +
            `<br>%{customdata[3]}` +
            `<br>%{x|%Y-%m-%d %H:%M} UTC: %{y:.4g} ${unit}<extra></extra>`,
        });
      }
    });
    return traces;
  }

  function rangeAxis() {
    const until = new Date(`${data.until}T00:00:00Z`);
    until.setUTCDate(until.getUTCDate() + 1);
    return [`${data.since}`, until.toISOString().slice(0, 10)];
  }

  /** Every value the metric chart draws: medians, their quartiles and the runs. */
  function drawnValues() {
    const values = data.series.flatMap((s) => [...s.q1, ...s.median, ...s.q3]);
    if (data.runs_shown) values.push(...data.runs.map((r) => r.value));
    return values.filter((v) => v !== null);
  }

  // Sites an order of magnitude apart read better on a log scale (a display choice: the
  // data and the API do not change). Its ticks are labelled in full, as the results page's
  // (fedprobe.logTicks): Plotly's own read 200 as "2" and 30 to 90 MB/s as "3" to "9".
  function yAxis() {
    const log = form.elements.scale.checked;
    const axis = {
      title: { text: fedprobe.text(`${data.label} (${data.unit})`) },
      type: log ? "log" : "linear",
      rangemode: log ? "normal" : "tozero",
      autorange: true,
    };
    if (!log) return { ...axis, tickmode: "auto", tickvals: null, ticktext: null };
    const format = data.unit === "B" ? fedprobeUnits.size : fedprobe.formatNumber;
    return { ...axis, ...fedprobe.logTicks(drawnValues(), format) };
  }

  function drawMetric() {
    const traces = metricTraces();
    if (!traces.length) {
      fedprobe.showMessage(chart, emptyMessage(), "empty");
      return false;
    }
    const layout = fedprobe.layout({
      height: 460,
      margin: { t: 40, r: 20, b: 60, l: LEFT },
      xaxis: {
        title: { text: "Date (UTC)" },
        type: "date",
        range: rangeAxis(),
        rangeselector: {
          buttons: [
            { count: 7, label: "7 d", step: "day", stepmode: "backward" },
            { count: 1, label: "1 m", step: "month", stepmode: "backward" },
            { count: 3, label: "3 m", step: "month", stepmode: "backward" },
            { count: 6, label: "6 m", step: "month", stepmode: "backward" },
            { step: "all", label: "all" },
          ],
        },
      },
      yaxis: yAxis(),
      legend: { orientation: "h", y: -0.22 },
    });
    chart.querySelector(".chart-message")?.remove();
    Plotly.react(chart, traces, layout, fedprobe.config);
    chart.removeAllListeners("plotly_click");
    chart.on("plotly_click", (event) => {
      const point = event.points[0];
      if (point && point.data.mode === "markers" && point.customdata) {
        location.assign(`/runs/${Number(point.customdata[0])}/`);
      }
    });
    return true;
  }

  function drawFailures() {
    if (!data.failures.length) {
      fedprobe.showMessage(strip, `No failed, timed-out or cancelled runs in this range.`, "empty");
      return;
    }
    const endpoints = endpointsById();
    const labels = data.endpoints.map((e) => fedprobe.text(lineName(e)));
    const merged = new Map();
    for (const row of data.failures) {
      const key = `${row.endpoint}|${row.day}|${markOf(row)}`;
      if (!merged.has(key)) merged.set(key, { ...row, mark: markOf(row), n: 0, classes: [] });
      const entry = merged.get(key);
      entry.n += row.n;
      entry.classes.push(`${row.error_class || "no class"} × ${row.n}`);
    }
    const traces = Object.entries(FAILURE_MARKS).map(([status, mark]) => {
      const rows = [...merged.values()].filter((r) => r.mark === status);
      return {
        type: "scatter",
        mode: "markers",
        name: mark.label,
        x: rows.map((r) => r.day),
        y: rows.map((r) => fedprobe.text(lineName(endpoints.get(r.endpoint)))),
        marker: { symbol: mark.symbol, color: mark.colour, size: rows.map((r) => 9 + 2 * Math.min(r.n, 5)),
          line: { width: 2, color: mark.colour } },
        customdata: rows.map((r) => [r.n, fedprobe.text(r.classes.join(", "))]),
        hovertemplate: `%{y}<br>%{x|%Y-%m-%d}: %{customdata[0]} ${mark.label}` +
          `<br>%{customdata[1]}<extra></extra>`,
        visible: rows.length ? true : "legendonly",
      };
    });
    const layout = fedprobe.layout({
      height: 140 + 26 * labels.length,
      margin: { t: 20, r: 20, b: 50, l: LEFT },
      xaxis: { title: { text: "Date (UTC)" }, type: "date", range: currentRange() || rangeAxis() },
      yaxis: { type: "category", categoryarray: labels, categoryorder: "array", range: [labels.length - 0.5, -0.5] },
      legend: { orientation: "h", y: 1.1 },
    });
    strip.querySelector(".chart-message")?.remove();
    Plotly.react(strip, traces, layout, fedprobe.config);
  }

  function currentRange() {
    const range = chart.layout && chart.layout.xaxis && chart.layout.xaxis.range;
    return range ? [...range] : null;
  }

  // Zoom, pan and the range selector move both charts.
  function link(from, to) {
    from.removeAllListeners("plotly_relayout");
    from.on("plotly_relayout", (event) => {
      if (linking || !to.layout) return;
      let update = null;
      if (event["xaxis.range[0]"] !== undefined) {
        update = { "xaxis.range": [event["xaxis.range[0]"], event["xaxis.range[1]"]] };
      } else if (event["xaxis.range"]) {
        update = { "xaxis.range": event["xaxis.range"] };
      } else if (event["xaxis.autorange"]) {
        update = { "xaxis.range": from.layout.xaxis.range };
      }
      if (!update) return;
      linking = true;
      Plotly.relayout(to, update).finally(() => { linking = false; });
    });
  }

  function emptyMessage() {
    const range = `between ${data.since} and ${data.until}`;
    const from = data.vantage_point ? ` from ${data.vantage_point}` : "";
    if (!data.parameter_set && data.parameter_sets.length) {
      const sets = data.parameter_sets.length;
      return `None of the ${sets} parameter set${sets === 1 ? "" : "s"} these endpoints measured` +
        `${from} ${range} agrees with the parameter fields given: pick one from the list ` +
        "\"Measured by these endpoints\", or empty a field.";
    }
    if (!data.parameter_set) {
      return `These endpoints measured nothing${from} ${range}: widen the range, pick ` +
        "other endpoints or another vantage point.";
    }
    return `No run of ${parameterLabel(data.parameter_set)} measured ${data.label.toLowerCase()} ` +
      `on these endpoints${from} ${range}: widen the range or pick another parameter set.`;
  }

  function describe() {
    if (!data) return "";
    const runs = data.series.reduce((sum, s) => sum + s.n.reduce((a, b) => a + b, 0), 0);
    const failed = {};
    for (const row of data.failures) failed[markOf(row)] = (failed[markOf(row)] || 0) + row.n;
    const failures = Object.entries(FAILURE_MARKS)
      .map(([status, mark]) => `${failed[status] || 0} ${mark.label}`).join(", ");
    const set = data.parameter_set ? `Parameter set ${parameterLabel(data.parameter_set)}. ` : "";
    const from = data.vantage_point ? ` from ${data.vantage_point}` : " from all vantage points";
    let runsNote = "";
    if (data.runs_shown) {
      runsNote = data.runs_truncated ? " The first runs are drawn as points (too many for all)."
        : " Each run is a point.";
    } else {
      runsNote = ` Runs are drawn as points for ranges of ${data.runs_max_days} days or fewer.`;
    }
    return `${set}${data.endpoints.length} endpoint${data.endpoints.length === 1 ? "" : "s"}${from}, ` +
      `${data.since} to ${data.until}, per ${data.bucket}: median and interquartile band of ` +
      `${runs} measured runs; ${failures}.${runsNote}`;
  }

  function fillPicker() {
    picker.replaceChildren();
    const first = document.createElement("option");
    first.value = "";
    first.textContent = data && data.parameter_sets.length ? "pick one…" : "none measured";
    picker.appendChild(first);
    for (const set of data ? data.parameter_sets : []) {
      const option = document.createElement("option");
      option.value = JSON.stringify(PARAMETERS.map((name) => set[name]));
      option.textContent = `${parameterLabel(set)} (${set.runs} runs)`;
      if (data.parameter_set && PARAMETERS.every((n) => data.parameter_set[n] === set[n])) {
        option.selected = true;
      }
      picker.appendChild(option);
    }
  }

  /** The read size choices: the sizes these endpoints measured, written as sizes ("4 KiB",
      as the server writes them); values stay bytes, as the address and the API have them. */
  function fillReadSizes() {
    const select = form.elements.read_size;
    const sizes = new Set(data.parameter_sets.map((s) => s.read_size));
    if (data.parameter_set) sizes.add(data.parameter_set.read_size);
    const options = [...sizes].sort((a, b) => a - b)
      .map((size) => new Option(fedprobeUnits.size(size), String(size)));
    select.replaceChildren(new Option(select.options[0].textContent, ""), ...options);
  }

  function syncForm() {
    if (!data) return;
    fillReadSizes();
    for (const name of PARAMETERS) {
      const value = data.parameter_set ? data.parameter_set[name] : "";
      form.elements[name].value = value === null ? "" : String(value);
    }
    form.elements.since.value = data.since;
    form.elements.until.value = data.until;
  }

  function clearErrors() {
    for (const element of form.querySelectorAll(".field.has-error")) element.classList.remove("has-error");
    for (const element of form.querySelectorAll("p.error")) element.remove();
    document.getElementById("form-errors")?.remove();
  }

  function showErrors(errors) {
    clearErrors();
    for (const [name, messages] of Object.entries(errors)) {
      const field = form.querySelector(`.field[data-field="${CSS.escape(name)}"]`) || form;
      field.classList.add("has-error");
      for (const message of messages) {
        const paragraph = document.createElement("p");
        paragraph.className = "error";
        paragraph.textContent = `${name}: ${message}`;
        field.appendChild(paragraph);
      }
    }
    const names = Object.keys(errors).join(", ");
    fedprobe.showMessage(chart, `Nothing drawn: fix ${names} above.`, "error");
    fedprobe.showMessage(strip, "Nothing drawn.", "empty");
  }

  function draw() {
    fillPicker();
    summary.textContent = describe();
    document.getElementById("runs-downloads").hidden = !(data && data.runs_shown && data.runs.length);
    if (!data) return;
    title.textContent = `${data.label} (${data.unit})`;
    const drawn = drawMetric();
    drawFailures();
    if (drawn && strip.layout) {
      link(chart, strip);
      link(strip, chart);
    }
  }

  function query() {
    const params = new URLSearchParams(new FormData(form));
    for (const [key, value] of [...params]) if (value === "") params.delete(key);
    return params;
  }

  async function update() {
    const params = query();
    fedprobe.permalink(form);
    apiLink.href = `${form.dataset.api}?${params}`;
    if (!params.has("endpoint") && !params.has("site")) {
      data = null;
      clearErrors();
      draw();
      fedprobe.showMessage(chart, "Pick endpoints or whole sites above, then Show.", "empty");
      strip.replaceChildren();
      return;
    }
    const mine = ++request;
    chart.setAttribute("aria-busy", "true");
    try {
      const response = await fetch(`${form.dataset.api}?${params}`, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (mine !== request) return;
      if (response.status === 400) {
        showErrors(await response.json());
        return;
      }
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      data = await response.json();
      clearErrors();
      syncForm();
      fedprobe.permalink(form);
      draw();
    } catch (error) {
      if (mine !== request) return;
      fedprobe.showMessage(chart, `The comparison could not be loaded (${error.message}): ` +
        "check the connection and Show again, or reload the page.", "error");
    } finally {
      if (mine === request) chart.removeAttribute("aria-busy");
    }
  }

  picker.addEventListener("change", () => {
    if (!picker.value) return;
    JSON.parse(picker.value).forEach((value, i) => { form.elements[PARAMETERS[i]].value = String(value); });
    update();
  });
  form.addEventListener("change", (event) => {
    if (event.target === picker) return;
    if (event.target.name === "scale") {
      fedprobe.permalink(form);
      if (data && chart.layout) Plotly.relayout(chart, { yaxis: yAxis() });
      return;
    }
    // One parameter changed: the others follow (the most measured set that agrees with it).
    if (PARAMETERS.includes(event.target.name)) {
      for (const name of PARAMETERS) if (name !== event.target.name) form.elements[name].value = "";
    }
    update();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    update();
  });
  fedprobe.downloads(document.getElementById("compare-card"), "compare", seriesRows,
    ["endpoint_id", "endpoint", "protocol", "site", "bucket", "day", "runs", "q1", "median", "q3",
      "metric", "unit"]);
  fedprobe.downloads(document.getElementById("runs-downloads"), "compare-runs", runRows,
    ["run", "endpoint_id", "endpoint", "protocol", "site", "vantage_point", "server_version", "created_at", "status", "value", "metric", "unit"]);
  fedprobe.downloads(document.getElementById("failures-card"), "compare-failures", failureRows,
    ["endpoint_id", "endpoint", "protocol", "site", "day", "status", "error_class", "runs"]);

  if (data) {
    draw();
    performance.mark("compare:drawn");
  } else {
    fillPicker();
    if (!chart.querySelector(".chart-message")) {
      fedprobe.showMessage(chart, "Pick endpoints or whole sites above, then Show.", "empty");
    }
  }
})();
