// The campaign results page: the papers' figures drawn from the selector's medians per
// parameter set (json_script "results-data"). Each chart is drawn across a few parameters;
// the controls choose the value of every other parameter that varies in the campaign, and
// are kept in the address (a permalink). Names go to Plotly through fedprobe.text only.
(function () {
  "use strict";

  const data = fedprobe.data("results-data");
  const form = document.getElementById("results-controls");
  const endpoints = new Map(data.endpoints.map((e) => [e.id, e]));
  const METHODS = ["direct", "copy", "stage"];
  // The operations beyond reads the page draws charts of (results_guidance.OPERATION_CHARTS).
  const STORMS = ["stat", "open", "list"];
  const COPIES = ["tpc-pull", "tpc-push"];
  // Error classes in the order the chart stacks them, each with an Okabe-Ito colour (and
  // grey for the runs nobody let finish).
  const { colours } = fedprobe;
  const ERROR_COLOURS = {
    timeout: colours.vermillion,
    refused: colours.orange,
    auth: colours.reddishPurple,
    "not-found": colours.skyBlue,
    "short-read": colours.yellow,
    checksum: colours.green,
    "server-error": colours.blue,
    lost: colours.black,
    cancelled: colours.grey,
  };
  const ERROR_CLASSES = Object.keys(ERROR_COLOURS);

  function formatPercent(fraction) {
    return `${Number((fraction * 100).toFixed(1))}%`;
  }

  function endpointName(id) {
    const endpoint = endpoints.get(id);
    return endpoint ? endpoint.name : `endpoint ${id}`;
  }

  function endpointLabel(id) {
    const endpoint = endpoints.get(id);
    return endpoint ? `${endpoint.name} (site ${endpoint.site})` : `endpoint ${id}`;
  }

  // What a cell is keyed by (the selector's DIMENSIONS: the endpoint, the vantage point and
  // every run parameter); any of them may vary, a shared one when the campaign was edited
  // between launches.
  const DIMENSIONS = {
    endpoint: ["Endpoint", endpointLabel],
    vantage_point: ["Vantage point", String],
    operation: ["Operation", String],
    method: ["Method", String],
    pattern: ["Pattern", String],
    read_size: ["Read size", fedprobeUnits.size],
    fraction: ["Fraction", formatPercent],
    clients: ["Clients", String],
    files: ["Files per client", String],
    depth: ["Depth", String],
    vector_size: ["Vector size", String],
    skip: ["Skip", String],
    readahead: ["Read-ahead", (v) => (v ? fedprobeUnits.size(v) : "off")],
    streams: ["Streams", String],
    file_size: ["File size (write)", fedprobeUnits.size],
    ops_per_client: ["Operations per client", String],
    rate: ["Rate (ops/s)", (v) => (v ? String(v) : "as fast as possible")],
    // A campaign's each: its runs pinned to IPv4 and to IPv6 are drawn apart, one at a time.
    address_family: ["Address family", (v) => (v === "any" ? "any" : `IPv${v}`)],
    replay_timing: ["Replay timing", String],
  };
  // A parameter added later and not named here yet is shown by its name, not a broken page.
  const dimension = (name) => DIMENSIONS[name] || [name, String];
  const label = (name) => dimension(name)[0];
  const show = (name, value) => dimension(name)[1](value);

  // -- the controls: a value for each parameter that varies -------------------------------

  // The selection: a value for each parameter that varies.
  const selection = {};
  const varying = data.varying;

  /** The value with the most parameter sets measured (a campaign whose runs are not its
      whole matrix), else direct, the largest fraction and read size, or the first. */
  function preferred(name, values) {
    const counts = new Map(values.map((v) => [v, 0]));
    for (const cell of data.cells) counts.set(cell[name], (counts.get(cell[name]) || 0) + 1);
    const most = Math.max(...counts.values());
    const candidates = values.filter((v) => counts.get(v) === most);
    if (name === "method" && candidates.includes("direct")) return "direct";
    if (name === "fraction" || name === "read_size") return candidates[candidates.length - 1];
    return candidates[0];
  }

  function fromAddress(name, values) {
    const raw = new URLSearchParams(location.search).get(name);
    if (raw === null) return undefined;
    return values.find((v) => String(v) === raw || (typeof v === "number" && Number(raw) === v));
  }

  /** Controls for the parameters some chart of the page is not drawn across (the charts
      of each operation draw its runs whatever the others). */
  function buildControls() {
    const container = document.getElementById("results-selects");
    const used = varying.filter((name) => DRAWN.some((chart) => !chart.across.includes(name)));
    for (const name of used) {
      const values = data.dimensions[name];
      const chosen = fromAddress(name, values);
      selection[name] = chosen === undefined ? preferred(name, values) : chosen;
      const field = document.createElement("div");
      field.className = "field";
      const labelElement = document.createElement("label");
      labelElement.htmlFor = `control-${name}`;
      labelElement.textContent = label(name);
      const select = document.createElement("select");
      select.id = `control-${name}`;
      select.name = name;
      values.forEach((value) => {
        const option = document.createElement("option");
        option.value = String(value);
        option.textContent = show(name, value);
        option.selected = value === selection[name];
        select.appendChild(option);
      });
      select.addEventListener("change", () => {
        selection[name] = values[select.selectedIndex];
        fedprobe.permalink(form);
        drawAll();
      });
      field.append(labelElement, select);
      container.appendChild(field);
    }
  }

  // -- what a chart shows: its cells, title, API link and hover text ----------------------

  /** The cells of the current selection, free in the `across` parameters. */
  function cellsAcross(across) {
    return data.cells.filter((cell) =>
      varying.every((name) => across.includes(name) || cell[name] === selection[name]),
    );
  }

  /** The controls a chart uses, as [name, value] pairs. */
  function fixedFor(across) {
    return varying.filter((name) => !across.includes(name)).map((n) => [n, selection[n]]);
  }

  /** A Plotly title (escaped): the endpoint the chart shows, then the other controls. */
  function titleFor(across) {
    const fixed = fixedFor(across).filter(([name]) => name !== "endpoint");
    const lines = [fixed.map(([n, v]) => `${label(n).toLowerCase()} ${show(n, v)}`).join(" · ")];
    if (!across.includes("endpoint") && data.endpoints.length) {
      const id = varying.includes("endpoint") ? selection.endpoint : data.endpoints[0].id;
      lines.unshift(endpointLabel(id));
    }
    return lines.filter(Boolean).map(fedprobe.text).join("<br>");
  }

  function apiUrl(across) {
    const params = new URLSearchParams();
    for (const [name, value] of fixedFor(across)) params.set(name, String(value));
    for (const name of ["since", "until"]) {
      const value = form.elements[name].value;
      if (value) params.set(name, value);
    }
    const base = document.getElementById("results-api").getAttribute("href");
    const query = params.toString();
    return query ? `${base}?${query}` : base;
  }

  function groupBy(rows, keyOf) {
    const groups = new Map();
    for (const row of rows) {
      const key = keyOf(row);
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(row);
    }
    return groups;
  }

  function methodOrder(a, b) {
    return METHODS.indexOf(a) - METHODS.indexOf(b);
  }

  const READS = ["read"];
  const DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"];

  /** Lines of `y` against `x`, one per `options.key` of a row (its name), coloured by
      `options.colour(row, index of its line)` and dashed by `options.dash(row)`. */
  function lines(rows, x, y, options) {
    const groups = groupBy(
      rows.filter((r) => r[y] !== null),
      options.key,
    );
    return [...groups.keys()].sort().map((name, index) => {
      const points = [...groups.get(name)].sort((a, b) => a[x] - b[x]);
      const colour = options.colour(points[0], index);
      return {
        type: "scatter",
        mode: "lines+markers",
        name: fedprobe.text(name),
        x: points.map((r) => r[x]),
        y: points.map((r) => r[y]),
        text: points.map(describeCell),
        hovertemplate: `%{text}<br>${options.hover}: %{y:.4g}<extra></extra>`,
        line: { color: colour, dash: options.dash ? options.dash(points[0]) : "solid" },
        marker: { color: colour },
      };
    });
  }

  /** One line per operation and endpoint: a colour per operation (in `order`), a dash per
      endpoint (in name order). */
  function operationLines(rows, y, order, hover) {
    const ids = [...new Set(rows.map((r) => r.endpoint))].sort((a, b) =>
      endpointName(a).localeCompare(endpointName(b)),
    );
    return lines(rows, "clients", y, {
      key: (r) => `${r.operation} · ${endpointName(r.endpoint)}`,
      colour: (r) => fedprobe.colour(Math.max(0, order.indexOf(r.operation))),
      dash: (r) => DASHES[ids.indexOf(r.endpoint) % DASHES.length],
      hover,
    });
  }

  /** The chart of one metric of `operations` against clients, a line per operation and
      endpoint; `title` names the axis (and, lower-cased, the hover). */
  function operationChart(id, operations, metric, title) {
    return {
      id,
      across: ["clients", "endpoint", "operation"],
      operations,
      metrics: [metric],
      needs: () => null,
      figure: (rows) => ({
        traces: operationLines(rows, metric, operations, title[0].toLowerCase() + title.slice(1)),
        layout: {
          xaxis: { title: { text: "Clients" }, tickvals: data.dimensions.clients },
          yaxis: { title: { text: title }, rangemode: "tozero" },
        },
      }),
    };
  }

  function methodColour(method) {
    return fedprobe.colour(Math.max(0, METHODS.indexOf(method)));
  }

  /** What a cell's runs did, in a line (reads: how they read). */
  function describeOperation(cell) {
    const op = cell.operation;
    if (op === "write") {
      return `write, ${fedprobeUnits.size(cell.file_size)} per client in ` +
        `${fedprobeUnits.size(cell.read_size)} requests, ${cell.clients} clients`;
    }
    if (STORMS.includes(op)) {
      const rate = cell.rate ? `${cell.rate} ops/s each` : "as fast as possible";
      return `${op}, ${cell.ops_per_client} per client ${rate}, ${cell.clients} clients`;
    }
    if (COPIES.includes(op)) return `${op}, ${cell.clients} clients`;
    if (op === "replay") return `replay (${cell.replay_timing}), ${cell.clients} clients`;
    return [
      `${cell.method}, ${cell.pattern}, ${fedprobeUnits.size(cell.read_size)} reads`,
      `${formatPercent(cell.fraction)} of the file, ${cell.clients} clients`,
    ].join("<br>");
  }

  function describeCell(cell) {
    return [
      fedprobe.text(endpointLabel(cell.endpoint)),
      describeOperation(cell) +
        (cell.address_family && cell.address_family !== "any" ? `, IPv${cell.address_family}` : ""),
      `${cell.runs} run${cell.runs === 1 ? "" : "s"}`,
    ].join("<br>");
  }

  const PARAMETER_COLUMNS = [
    "endpoint", "site", "vantage_point", "method", "pattern", "read_size", "fraction",
    "clients", "files", "depth", "vector_size", "skip", "readahead", "streams",
    "address_family", "runs",
  ];

  // The download columns of the charts of operations beyond reads: what their runs did.
  const OPERATION_COLUMNS = {
    write: ["file_size", "read_size"],
    metadata: ["ops_per_client", "rate"],
    "tpc-rate": [],
    "tpc-start": [],
    replay: ["replay_timing"],
  };

  /** A chart's download columns: the parameters that tell its cells apart, its metrics. */
  function columnsOf(chart) {
    if (chart.columns) return chart.columns;
    const own = OPERATION_COLUMNS[chart.id];
    const parameters = own
      ? ["endpoint", "site", "vantage_point", "operation", "clients", ...own, "address_family", "runs"]
      : PARAMETER_COLUMNS;
    return [...parameters, ...chart.metrics];
  }

  /** A drawn cell as a download row: names for ids, then the chart's `columns`. */
  function tableRow(cell, columns) {
    const endpoint = endpoints.get(cell.endpoint) || {};
    const row = { ...cell, endpoint: endpoint.name, site: endpoint.site };
    const picked = {};
    for (const column of columns) picked[column] = row[column];
    return picked;
  }

  /** Lines of `y` against `x`, one per method (shared by four charts). */
  function methodLines(rows, x, y, options = {}) {
    const traces = [];
    const byMethod = groupBy(rows, (r) => r.method);
    for (const method of [...byMethod.keys()].sort(methodOrder)) {
      const points = byMethod.get(method).filter((r) => r[y] !== null);
      points.sort((a, b) => a[x] - b[x]);
      const trace = {
        type: "scatter",
        mode: "lines+markers",
        name: fedprobe.text(`${method}${options.suffix || ""}`),
        x: points.map((r) => r[x]),
        y: points.map((r) => r[y]),
        text: points.map(describeCell),
        hovertemplate: `%{text}<br>${options.hover || y}: %{y:.4g}<extra></extra>`,
        line: { color: methodColour(method), dash: options.dash || "solid" },
        marker: { color: methodColour(method) },
      };
      if (options.spread) {
        trace.error_y = {
          type: "data",
          symmetric: false,
          array: points.map((r) => (r.wall_s_p75 ?? r[y]) - r[y]),
          arrayminus: points.map((r) => r[y] - (r.wall_s_p25 ?? r[y])),
          thickness: 1,
          width: 3,
        };
      }
      traces.push(trace);
    }
    return traces;
  }

  function dimensionNames() {
    return Object.keys(DIMENSIONS);
  }

  /** What stands instead of a chart the campaign cannot draw (computed by the server from
      what the campaign asks for: values to add, or runs still to come), or null. */
  function guidance(name) {
    return () => data.guidance[name];
  }

  function readaheadSuffix(cell) {
    return cell.readahead ? ` + read-ahead ${fedprobeUnits.size(cell.readahead)}` : "";
  }

  /** Furano & Hanushevsky's names for the ways of reading. */
  function variant(cell) {
    const names = {
      sequential: "sequential (sync)",
      random: "random (sync)",
      skip: "skip (sync)",
      async: `async, ${cell.depth} outstanding`,
      vector: `vector, ${cell.vector_size} per request`,
    };
    const streams = cell.streams > 1 ? `, ${cell.streams} streams` : "";
    return `${names[cell.pattern] || cell.pattern}${readaheadSuffix(cell)}${streams}`;
  }

  /** Log-axis ticks at the powers of two (of four when they get crowded) the values span. */
  function sizeTicks(values) {
    if (!values.length) return {};
    const low = Math.floor(Math.log2(Math.min(...values)));
    const high = Math.ceil(Math.log2(Math.max(...values)));
    const step = high - low > 12 ? 4 : high - low > 6 ? 2 : 1;
    const tickvals = [];
    for (let power = low; power <= high; power += step) tickvals.push(2 ** power);
    return { tickvals, ticktext: tickvals.map(fedprobeUnits.size) };
  }

  function withValues(rows, metrics) {
    return rows.filter((r) => metrics.some((m) => r[m] !== null));
  }

  // -- the charts -------------------------------------------------------------------------

  // Each chart: the parameters it is drawn across, the columns of its downloads, what the
  // campaign must have measured for it (else what to add), which of the selection's cells
  // it draws (`pick`, default: those with a value to draw) and its figure.
  const CHARTS = [
    {
      id: "fraction",
      across: ["fraction", "method", "operation"],
      operations: READS,
      metrics: ["wall_s", "wall_s_p25", "wall_s_p75"],
      needs: guidance("fraction"),
      figure: (rows) => ({
        traces: methodLines(rows, "fraction", "wall_s", { spread: true, hover: "median (s)" }),
        layout: {
          xaxis: {
            title: { text: "Fraction of the file read" },
            tickformat: ".0%",
            rangemode: "tozero",
          },
          yaxis: { title: { text: "Time to read (s)" }, rangemode: "tozero" },
        },
      }),
    },
    {
      id: "read-size",
      across: ["read_size", "method", "operation"],
      operations: READS,
      metrics: ["wall_s"],
      needs: guidance("read_size"),
      figure: (rows) => ({
        traces: methodLines(rows, "read_size", "wall_s", { hover: "median (s)" }),
        layout: {
          xaxis: {
            title: { text: "Read size (bytes, log)" },
            type: "log",
            tickvals: data.dimensions.read_size,
            ticktext: data.dimensions.read_size.map(fedprobeUnits.size),
          },
          yaxis: {
            title: { text: "Time to read (log)" },
            type: "log",
            ...fedprobe.secondsTicks(rows.map((r) => r.wall_s)),
          },
        },
      }),
    },
    {
      id: "throughput",
      across: ["clients", "method", "operation"],
      operations: READS,
      metrics: ["throughput_mbps", "client_throughput_mbps"],
      needs: guidance("clients"),
      figure: (rows) => ({
        traces: [
          ...methodLines(rows, "clients", "throughput_mbps", {
            suffix: ", aggregate",
            hover: "aggregate (MB/s)",
          }),
          ...methodLines(rows, "clients", "client_throughput_mbps", {
            suffix: ", per client",
            hover: "per client (MB/s)",
            dash: "dot",
          }),
        ],
        layout: {
          xaxis: { title: { text: "Clients" }, tickvals: data.dimensions.clients },
          yaxis: { title: { text: "Throughput (MB/s)" }, rangemode: "tozero" },
        },
      }),
    },
    {
      id: "open",
      across: ["clients", "method", "operation"],
      operations: READS,
      metrics: ["open_s"],
      needs: guidance("clients"),
      figure: (rows) => ({
        traces: methodLines(rows, "clients", "open_s", { hover: "open (s)" }),
        layout: {
          xaxis: { title: { text: "Clients" }, tickvals: data.dimensions.clients },
          yaxis: { title: { text: "Open time, median client (s)" }, rangemode: "tozero" },
        },
      }),
    },
    {
      id: "doors",
      across: ["endpoint", "operation"],
      operations: READS,
      metrics: ["open_s", "wall_s"],
      needs: () => null,
      figure: doorsFigure,
    },
    {
      id: "bytes",
      across: dimensionNames().filter((n) => n !== "endpoint" && n !== "vantage_point"),
      operations: READS,
      metrics: ["bytes_requested", "bytes_wire", "bytes_read"],
      needs: () => null,
      pick: (rows) => rows.filter((r) => r.bytes_requested && r.bytes_wire),
      figure: bytesFigure,
    },
    {
      id: "latency",
      across: ["endpoint", "pattern", "readahead", "depth", "vector_size", "streams", "operation"],
      operations: READS,
      metrics: ["variant", "ttfb_s", "wall_s"],
      needs: guidance("latency"),
      pick: (rows) =>
        rows.filter((r) => r.wall_s !== null).map((r) => ({ ...r, variant: variant(r) })),
      figure: latencyFigure,
    },
    {
      id: "write",
      across: ["clients", "endpoint", "operation"],
      operations: ["write"],
      metrics: ["throughput_mbps"],
      needs: () => null,
      figure: (rows) => ({
        traces: lines(rows, "clients", "throughput_mbps", {
          key: (r) => endpointName(r.endpoint),
          colour: (r, index) => fedprobe.colour(index),
          hover: "written (MB/s)",
        }),
        layout: {
          xaxis: { title: { text: "Clients" }, tickvals: data.dimensions.clients },
          yaxis: { title: { text: "Write throughput (MB/s)" }, rangemode: "tozero" },
        },
      }),
    },
    operationChart("metadata", STORMS, "ops_per_s", "Operations per second"),
    operationChart("tpc-rate", COPIES, "tpc_rate_mbps", "Copy rate (MB/s)"),
    operationChart("tpc-start", COPIES, "tpc_start_s", "Time to start (s)"),
    {
      id: "replay",
      across: ["endpoint", "clients", "operation"],
      operations: ["replay"],
      metrics: ["wall_s", "wall_s_p25", "wall_s_p75"],
      needs: () => null,
      figure: replayFigure,
    },
    {
      id: "errors",
      across: dimensionNames().filter((n) => n !== "vantage_point"),
      columns: [
        "endpoint", "site", "vantage_point", "operation", "method", "status", "error_class",
        "runs", "of_runs",
      ],
      failures: true,
      figure: errorsFigure,
    },
  ];

  // Only the charts the page has a card for: the server leaves out those whose question the
  // campaign does not ask (data.charts_not_asked, listed under "Not drawn").
  const DRAWN = CHARTS.filter((chart) => document.getElementById(`card-${chart.id}`));

  // -- open time and time to read per door ------------------------------------------------

  const CREDENTIALS = {
    none: "anonymous",
    token: "token",
    "oauth-client": "token",
    "x509-proxy": "X.509 proxy",
  };

  /** An endpoint as a door: its name, protocol and how it is passed. */
  function doorLabel(id) {
    const endpoint = endpoints.get(id);
    if (!endpoint) return `endpoint ${id}`;
    const how = CREDENTIALS[endpoint.credential_kind] || endpoint.credential_kind;
    return `${endpoint.name} (${endpoint.protocol}, ${how})`;
  }

  function doorsFigure(rows) {
    const order = [...rows].sort(
      (a, b) => (a.open_s ?? Infinity) - (b.open_s ?? Infinity) || a.endpoint - b.endpoint,
    );
    const category = (r) => fedprobe.text(doorLabel(r.endpoint));
    const bars = [
      ["open_s", "open (median client)", colours.blue],
      ["wall_s", "whole run", colours.orange],
    ];
    const traces = bars.map(([metric, name, colour]) => {
      const drawn = order.filter((r) => r[metric] !== null);
      return {
        type: "bar",
        name,
        x: drawn.map(category),
        y: drawn.map((r) => r[metric]),
        text: drawn.map((r) => `${describeCell(r)}<br>${name}`),
        textposition: "none",
        hovertemplate: "%{text}: %{y:.4g} s<extra></extra>",
        marker: { color: colour },
      };
    });
    return {
      traces,
      layout: {
        barmode: "group",
        xaxis: {
          title: { text: "Door (in order of open time)" },
          type: "category",
          categoryorder: "array",
          categoryarray: order.map(category),
        },
        yaxis: {
          title: { text: "Time (log)" },
          type: "log",
          ...fedprobe.secondsTicks(rows.flatMap((r) => [r.open_s, r.wall_s])),
        },
      },
    };
  }

  // -- bytes needed against bytes moved ---------------------------------------------------

  function bytesFigure(points) {
    const groups = groupBy(points, (r) => `${r.method}${readaheadSuffix(r)}`);
    const names = [...groups.keys()].sort((a, b) => methodOrder(a.split(" ")[0], b.split(" ")[0]));
    const traces = names.map((name) => {
      const group = groups.get(name);
      const method = group[0].method;
      return {
        type: "scatter",
        mode: "markers",
        name: fedprobe.text(name),
        x: group.map((r) => r.bytes_requested),
        y: group.map((r) => r.bytes_wire),
        text: group.map(
          (r) =>
            `${describeCell(r)}<br>moved ${(r.bytes_wire / r.bytes_requested).toFixed(2)}x ` +
            "what was needed",
        ),
        hovertemplate: "%{text}<br>needed %{x:,} B, moved %{y:,} B<extra></extra>",
        marker: {
          color: methodColour(method),
          size: 9,
          symbol: group[0].readahead ? "diamond" : "circle",
          line: { color: colours.background, width: 1 },
        },
      };
    });
    const all = points.flatMap((r) => [r.bytes_requested, r.bytes_wire]);
    const ticks = sizeTicks(all);
    if (all.length) {
      const low = Math.min(...all);
      const high = Math.max(...all);
      traces.push({
        type: "scatter",
        mode: "lines",
        name: "transferred = needed",
        x: [low, high],
        y: [low, high],
        hoverinfo: "skip",
        line: { color: colours.muted, dash: "dash", width: 1 },
      });
    }
    return {
      traces,
      layout: {
        xaxis: {
          title: { text: "Bytes needed (requested by the readers, log)" },
          type: "log",
          ...ticks,
        },
        yaxis: { title: { text: "Bytes transferred (over the wire, log)" }, type: "log", ...ticks },
      },
    };
  }

  // -- time to read per endpoint (latency) ------------------------------------------------

  const ORDER_TITLES = {
    rtt: "Endpoint (in order of round-trip time)",
    "direct-ttfb": "Endpoint (in order of the direct reads' time to first byte)",
    name: "Endpoint",
  };

  /** The server's order of the endpoints for the vantage point the controls choose. */
  function latencyOrder() {
    const place = varying.includes("vantage_point")
      ? selection.vantage_point
      : data.dimensions.vantage_point[0];
    return data.latency_order.find((o) => o.vantage_point === place);
  }

  function latencyFigure(measured) {
    const drawn = new Set(measured.map((r) => r.endpoint));
    const known = latencyOrder() || { by: "name", endpoints: [] };
    const order = [
      ...known.endpoints.filter((id) => drawn.has(id)),
      ...[...drawn].filter((id) => !known.endpoints.includes(id)),
    ];
    const category = (id) => fedprobe.text(endpointName(id));
    const groups = groupBy(measured, (r) => r.variant);
    const traces = [...groups.keys()].sort().map((name, index) => {
      const group = groups.get(name);
      return {
        type: "bar",
        name: fedprobe.text(name),
        x: group.map((r) => category(r.endpoint)),
        y: group.map((r) => r.wall_s),
        text: group.map((r) => `${describeCell(r)}<br>${fedprobe.text(name)}`),
        textposition: "none",
        hovertemplate: "%{text}<br>median time %{y:.4g} s<extra></extra>",
        marker: { color: fedprobe.colour(index) },
      };
    });
    return {
      traces,
      layout: {
        barmode: "group",
        xaxis: {
          title: { text: ORDER_TITLES[known.by] },
          type: "category",
          categoryorder: "array",
          categoryarray: order.map(category),
        },
        yaxis: {
          title: { text: "Time to read (log)" },
          type: "log",
          ...fedprobe.secondsTicks(measured.map((r) => r.wall_s)),
        },
      },
    };
  }

  // -- a replayed job's time per endpoint -------------------------------------------------

  /** Bars of the replay's median wall time (25th to 75th percentile) per endpoint, one per
      client count: the same recorded job compared across endpoints. */
  function replayFigure(rows) {
    const order = [...new Set(rows.map((r) => r.endpoint))].sort((a, b) =>
      endpointName(a).localeCompare(endpointName(b)),
    );
    const category = (id) => fedprobe.text(endpointName(id));
    const byClients = groupBy(rows, (r) => r.clients);
    const traces = [...byClients.keys()]
      .sort((a, b) => a - b)
      .map((clients, index) => {
        const group = byClients.get(clients);
        return {
          type: "bar",
          name: `${clients} client${clients === 1 ? "" : "s"}`,
          x: group.map((r) => category(r.endpoint)),
          y: group.map((r) => r.wall_s),
          error_y: {
            type: "data",
            symmetric: false,
            array: group.map((r) => (r.wall_s_p75 ?? r.wall_s) - r.wall_s),
            arrayminus: group.map((r) => r.wall_s - (r.wall_s_p25 ?? r.wall_s)),
            thickness: 1,
            width: 3,
          },
          text: group.map(describeCell),
          textposition: "none",
          hovertemplate: "%{text}<br>median time %{y:.4g} s<extra></extra>",
          marker: { color: fedprobe.colour(index) },
        };
      });
    return {
      traces,
      layout: {
        barmode: "group",
        xaxis: {
          title: { text: "Endpoint" },
          type: "category",
          categoryorder: "array",
          categoryarray: order.map(category),
        },
        yaxis: { title: { text: "Time to replay the job (s)" }, rangemode: "tozero" },
      },
    };
  }

  // -- errors -----------------------------------------------------------------------------

  function errorsFigure(rows) {
    const how = (f) => (f.operation === "read" ? f.method : f.operation);
    const category = (f) => fedprobe.text(`${endpointName(f.endpoint)} · ${how(f)}`);
    const rank = (c) => (ERROR_CLASSES.includes(c) ? ERROR_CLASSES.indexOf(c) : 99);
    const groups = groupBy(rows, (f) => f.error_class);
    const traces = [...groups.keys()]
      .sort((a, b) => rank(a) - rank(b))
      .map((errorClass) => {
        const group = groups.get(errorClass);
        return {
          type: "bar",
          orientation: "h",
          name: fedprobe.text(errorClass),
          y: group.map(category),
          x: group.map((f) => f.runs),
          text: group.map(
            (f) =>
              `${fedprobe.text(endpointLabel(f.endpoint))}<br>${how(f)}: ${f.runs} of ` +
              `${f.of_runs} runs ${f.status} (${fedprobe.text(errorClass)})`,
          ),
          textposition: "none",
          hovertemplate: "%{text}<extra></extra>",
          marker: { color: ERROR_COLOURS[errorClass] || colours.muted },
        };
      });
    const categories = [...new Set(rows.map(category))].sort().reverse(); // top to bottom
    const totals = new Map();
    for (const f of rows) totals.set(category(f), (totals.get(category(f)) || 0) + f.runs);
    return {
      traces,
      layout: {
        barmode: "stack",
        height: 220 + 34 * categories.length,
        margin: { t: 60, r: 20, b: 100, l: 20 },
        showlegend: true,
        xaxis: {
          title: { text: "Runs" },
          rangemode: "tozero",
          dtick: Math.max(...totals.values()) <= 10 ? 1 : undefined,
        },
        yaxis: {
          type: "category",
          categoryorder: "array",
          categoryarray: categories,
          automargin: true,
        },
      },
    };
  }

  // -- the crossover of direct and copy (fraction chart) ----------------------------------

  /** The crossover of the selection's parameter set, if direct and copy were measured. */
  function crossoverFound() {
    return data.crossovers.find((c) =>
      varying.every(
        (n) =>
          n === "method" || n === "fraction" || c[n] === (n === "operation" ? "read" : selection[n]),
      ),
    );
  }

  function crossoverSentence() {
    if (!data.cells.length) return "";
    if (data.guidance.methods) return data.guidance.methods;
    const found = crossoverFound();
    return found ? found.text : "No parameter set here was measured with both direct and copy.";
  }

  function markCrossover(layout) {
    const found = crossoverFound();
    const x = found ? found.crossover_fraction : null;
    if (x === null) return;
    const line = { color: colours.black, dash: "dash", width: 1 };
    layout.shapes = [{ type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1, line }];
    // Inside the plot, at its top: above it is the title's.
    layout.annotations = [
      {
        xref: "x",
        yref: "paper",
        x,
        y: 1,
        xanchor: "left",
        yanchor: "top",
        xshift: 4,
        showarrow: false,
        bgcolor: fedprobe.rgba(colours.background, 0.85),
        text: `crossover ${x >= 0.01 ? Math.round(x * 100) : Math.round(x * 1000) / 10}%`,
      },
    ];
  }

  // -- drawing ----------------------------------------------------------------------------

  /** What a chart draws for the selection: its rows, or the message that stands instead. */
  function chartRows(chart) {
    if (chart.failures) {
      const rows = data.failures.filter(
        (f) => !varying.includes("vantage_point") || f.vantage_point === selection.vantage_point,
      );
      return rows.length
        ? { rows }
        : { rows, message: "No failed, timed-out, partial or cancelled runs: nothing to count." };
    }
    if (!data.cells.length) return { rows: [], message: noRunsMessage() };
    const missing = chart.needs();
    if (missing) return { rows: [], message: missing };
    const own = cellsAcross(chart.across).filter((c) => chart.operations.includes(c.operation));
    const selected = withValues(own, chart.metrics);
    const rows = chart.pick ? chart.pick(selected) : selected;
    if (rows.length) return { rows };
    return {
      rows,
      message: "No measured runs for these controls (see Errors below): pick other values above.",
    };
  }

  /** A chart's rows as its downloads have them: names for ids, its columns only. */
  function downloadRows(chart) {
    const { rows } = chartRows(chart);
    if (chart.failures) {
      return rows.map((f) => {
        const endpoint = endpoints.get(f.endpoint) || {};
        return { ...f, endpoint: endpoint.name, site: endpoint.site };
      });
    }
    return rows.map((r) => tableRow(r, columnsOf(chart)));
  }

  function plot(element, figure, title) {
    if (element.querySelector(".chart-message")) element.replaceChildren();
    const layout = fedprobe.layout({
      height: 380,
      margin: { t: 60, r: 20, b: 100, l: 70 },
      // Below the axis title, whatever the tick labels take.
      legend: { orientation: "h", x: 0, y: 0, yref: "container", yanchor: "bottom" },
      ...figure.layout,
      title: { text: title, font: { size: 13 } },
    });
    layout.xaxis = { automargin: true, ...layout.xaxis };
    layout.yaxis = { automargin: true, ...layout.yaxis };
    Plotly.react(element, figure.traces, layout, fedprobe.config);
  }

  /** Draw a chart; its element then says for which controls (data-drawn-for). */
  function render(chart) {
    const element = document.getElementById(`chart-${chart.id}`);
    const { rows, message } = chartRows(chart);
    if (message) {
      fedprobe.showMessage(element, message);
    } else {
      const figure = chart.figure(rows);
      if (chart.id === "fraction") markCrossover(figure.layout);
      plot(element, figure, titleFor(chart.across));
    }
    element.dataset.drawnFor = new URLSearchParams(selection).toString();
    performance.mark(`results:drawn:${chart.id}`);
  }

  /** The text around a chart (cheap: done for every chart at once). */
  function describe(chart) {
    const card = document.getElementById(`card-${chart.id}`);
    card.querySelector("[data-role=api]").href = apiUrl(chart.across);
    card.querySelector("[data-role=selection]").textContent = selectionNote(chart.across);
    if (chart.id === "fraction") {
      document.getElementById("crossover-text").textContent = crossoverSentence();
    }
    if (chart.id === "latency") {
      const order = latencyOrder();
      card.querySelector("[data-role=note]").textContent =
        order && !chart.needs() ? order.text : "";
    }
  }

  function noRunsMessage() {
    return data.active_runs
      ? `No run has been measured yet (${data.active_runs} queued or running): reload when ` +
          "they end."
      : "No measured runs in this campaign (or these days): launch it from the campaign page.";
  }

  function selectionNote(across) {
    const drawnAcross = across.filter((n) => varying.includes(n)).map(label);
    const fixed = fixedFor(across).map(([n, v]) => `${label(n).toLowerCase()} ${show(n, v)}`);
    const parts = [];
    if (drawnAcross.length) parts.push(`Drawn across ${drawnAcross.join(", ").toLowerCase()}.`);
    if (fixed.length) parts.push(`From the controls: ${fixed.join(", ")}.`);
    return parts.join(" ");
  }

  // Plotly draws a chart when it comes near the screen, one chart per task, so the page
  // answers while the rest are drawn; a chart off screen is redrawn when it comes back.
  const stale = new Set(DRAWN.map((c) => c.id));
  const onScreen = new Set();
  const byId = new Map(DRAWN.map((c) => [c.id, c]));

  function drawSoon(id) {
    setTimeout(() => {
      if (!stale.has(id) || !onScreen.has(id)) return;
      stale.delete(id);
      render(byId.get(id));
    }, 0);
  }

  function watchScreen() {
    const observer = new IntersectionObserver(
      (entries) => {
        for (const entry of entries) {
          const id = entry.target.dataset.chart;
          if (entry.isIntersecting) {
            onScreen.add(id);
            drawSoon(id);
          } else {
            onScreen.delete(id);
          }
        }
      },
      { rootMargin: "300px 0px" },
    );
    for (const chart of DRAWN) {
      const card = document.getElementById(`card-${chart.id}`);
      card.dataset.chart = chart.id;
      observer.observe(card);
    }
  }

  function drawAll() {
    for (const chart of DRAWN) {
      describe(chart);
      stale.add(chart.id);
    }
    for (const id of onScreen) drawSoon(id);
  }

  function wireDownloads() {
    for (const chart of DRAWN) {
      const columns = columnsOf(chart);
      const card = document.getElementById(`card-${chart.id}`);
      const basename = `campaign-${data.campaign.id}-${chart.id}`;
      fedprobe.downloads(card, basename, () => downloadRows(chart), columns);
    }
  }

  // -- the answer in words ----------------------------------------------------------------

  /** The advice reads every run of the campaign (seconds for thousands): fetched after the
      charts are wired, from the server's fragment (escaped by its template). */
  function loadAnswer() {
    const section = document.getElementById("answer");
    const loading = document.getElementById("answer-loading");
    fetch(section.dataset.url, { credentials: "same-origin" })
      .then((response) => {
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        return response.text();
      })
      .then((html) => {
        loading.remove();
        section.insertAdjacentHTML("beforeend", html);
        section.dataset.loaded = "answer";
      })
      .catch((error) => {
        loading.textContent = `The advice could not be read (${error.message}): reload the page.`;
        section.dataset.loaded = "error";
      });
  }

  // -- wiring -----------------------------------------------------------------------------

  performance.mark("results:script");
  buildControls();
  drawAll();
  watchScreen();
  wireDownloads();
  loadAnswer();
})();
