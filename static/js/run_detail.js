// A run's page. An ended run: each client's timeline (its phases as a Gantt, first byte and
// errors marked), drawn first; below it, drawn once the page has loaded, the latency
// histograms of each operation kind merged over the clients and the data servers that
// served the clients; all from the run-charts data (the API's run detail has the same). A
// queued or running run: every 2 s the status view gives the run's status and each client's
// bytes, drawn in place (no reload) until the run ends; then the page reloads once, and the
// server renders the results. Without JavaScript the page shows the tables it was rendered
// with.
(function () {
  "use strict";

  const MiB = 1024 * 1024;
  const live = fedprobe.data("run-live");
  const charts = fedprobe.data("run-charts");
  const controls = document.getElementById("run-chart-controls");
  const PHASES = ["copy", "stage-wait", "open", "read", "close"];
  const { colours } = fedprobe;
  const PHASE_COLOURS = {
    copy: colours.green,
    "stage-wait": colours.reddishPurple,
    open: colours.orange,
    read: colours.blue,
    close: colours.skyBlue,
  };
  const ERROR_COLOUR = colours.vermillion;
  const OK_COLOUR = colours.green;
  const PENDING_COLOUR = colours.line;
  const TIMELINE_COLUMNS = [
    "client", "event", "start_s", "end_s", "duration_s", "status", "served_by",
    "error_class", "error_message",
  ];
  const LATENCY_COLUMNS = ["kind", "series", "lower_us", "upper_us", "count"];
  const SERVER_COLUMNS = ["server", "clients_ok", "clients_failed", "clients"];
  const PROGRESS_COLUMNS = ["client", "status", "bytes_read", "bytes_planned"];

  const element = (id) => document.getElementById(id);
  const clientLabel = (client) => `client ${client}`;
  const round6 = (value) => Math.round(value * 1e6) / 1e6;

  /** A message in place of the chart (see fedprobe.showMessage), at the message's height. */
  function message(chart, text, kind = "empty") {
    chart.style.removeProperty("height");
    chart.style.removeProperty("min-height");
    fedprobe.showMessage(chart, text, kind);
  }

  /** Size the chart's element to the plot, so that a responsive resize keeps that size. */
  function sized(chart, height) {
    chart.style.minHeight = "0";
    chart.style.height = `${height}px`;
    return height;
  }

  // The controls sit in their charts' cards and belong to one form (their form attribute),
  // so that one permalink keeps them all.
  const option = (name) => controls.elements.namedItem(name);

  /** The controls as the permalink left them. */
  function restoreControls() {
    const query = new URLSearchParams(window.location.search);
    for (const name of ["order", "counts"]) {
      const select = option(name);
      const wanted = query.get(name);
      if (select && [...select.options].some((o) => o.value === wanted)) select.value = wanted;
    }
  }

  function errorText(error) {
    if (!error) return "";
    return [error.class, error.message].filter(Boolean).join(": ");
  }

  // -- the timeline (Gantt) -------------------------------------------------------------

  /** A chart with a row per client: 18 px rows, thinner (down to 6 px) past ~600 px. */
  function rowsHeight(rows, least) {
    return Math.max(least, 140 + Math.min(18 * rows, Math.max(600, 6 * rows)));
  }

  /** Where a client's row ends: its wall time, else its last phase, else its start. */
  function clientEnd(row) {
    if (row.end_s !== null && row.end_s !== undefined) return row.end_s;
    return row.phases.reduce((end, phase) => Math.max(end, phase.end_s), 0);
  }

  function orderedClients(rows, order) {
    const readStart = (row) => {
      const read = row.phases.find((p) => p.phase === "read") ?? row.phases[0];
      return read ? read.start_s : Infinity;
    };
    const keys = {
      client: (row) => [row.client],
      start: (row) => [readStart(row), row.client],
      end: (row) => [clientEnd(row), row.client],
      server: (row) => [row.served_by.join(" ") || "~", row.client], // none: last
    };
    const key = keys[order] ?? keys.client;
    return [...rows].sort((a, b) => {
      const [ka, kb] = [key(a), key(b)];
      for (let i = 0; i < ka.length; i += 1) {
        if (ka[i] < kb[i]) return -1;
        if (ka[i] > kb[i]) return 1;
      }
      return 0;
    });
  }

  /** The rows the Gantt draws: each phase, each first byte, each error. */
  function timelineRows(rows) {
    const drawn = [];
    for (const row of rows) {
      const common = {
        client: row.client,
        status: row.status,
        served_by: row.served_by.join(" "),
        error_class: "",
        error_message: "",
      };
      for (const phase of row.phases) {
        drawn.push({
          ...common,
          event: phase.phase,
          start_s: phase.start_s,
          end_s: phase.end_s,
          duration_s: round6(phase.end_s - phase.start_s),
        });
      }
      if (row.ttfb_s !== null && row.ttfb_s !== undefined) {
        const at = row.ttfb_s;
        drawn.push({ ...common, event: "first byte", start_s: at, end_s: at, duration_s: 0 });
      }
      if (row.error) {
        const at = clientEnd(row);
        drawn.push({
          ...common,
          event: "error",
          start_s: at,
          end_s: at,
          duration_s: 0,
          error_class: row.error.class,
          error_message: row.error.message,
        });
      }
    }
    return drawn;
  }

  function ganttTraces(drawn) {
    const stage = live.method === "stage";
    const traces = [];
    for (const phase of PHASES) {
      const rows = drawn.filter((r) => r.event === phase);
      if (!rows.length) continue;
      // FileStager copies the next file while the current one is read: copies get the
      // lower half of the row so that both stay visible.
      let geometry = {};
      if (stage) {
        const copy = phase === "copy";
        geometry = copy ? { width: 0.35, offset: 0.05 } : { width: 0.45, offset: -0.45 };
      }
      traces.push({
        type: "bar",
        orientation: "h",
        name: phase,
        y: rows.map((r) => clientLabel(r.client)),
        base: rows.map((r) => r.start_s),
        x: rows.map((r) => r.duration_s),
        marker: { color: PHASE_COLOURS[phase] },
        customdata: rows.map((r) => [r.start_s, r.end_s, fedprobe.text(r.served_by || "—")]),
        hovertemplate:
          `%{y}: ${fedprobe.text(phase)} from %{customdata[0]:.4f} s to %{customdata[1]:.4f} s` +
          " (%{x:.4f} s)<br>served by %{customdata[2]}<extra></extra>",
        ...geometry,
      });
    }
    const firstBytes = drawn.filter((r) => r.event === "first byte");
    if (firstBytes.length) {
      traces.push({
        type: "scatter",
        mode: "markers",
        name: "first byte",
        y: firstBytes.map((r) => clientLabel(r.client)),
        x: firstBytes.map((r) => r.start_s),
        marker: { symbol: "diamond", size: 8, color: colours.black },
        hovertemplate: "%{y}: first byte at %{x:.4f} s<extra></extra>",
      });
    }
    const errors = drawn.filter((r) => r.event === "error");
    if (errors.length) {
      traces.push({
        type: "scatter",
        mode: "markers",
        name: "error",
        y: errors.map((r) => clientLabel(r.client)),
        x: errors.map((r) => r.start_s),
        marker: {
          symbol: "x", size: 12, color: ERROR_COLOUR, line: { width: 1, color: ERROR_COLOUR },
        },
        customdata: errors.map((r) => [
          fedprobe.text(r.error_class),
          fedprobe.text(r.error_message.slice(0, 300)),
        ]),
        hovertemplate:
          "%{y} failed at %{x:.4f} s: %{customdata[0]}<br>%{customdata[1]}<extra></extra>",
      });
    }
    return traces;
  }

  function emptyTimelineMessage() {
    const error = errorText(live.error);
    if (live.progress.status === "cancelled" && !error) {
      return "No timeline: the run was cancelled before its clients read anything.";
    }
    if (error) {
      const status = live.progress.status;
      return `No timeline: the run ended (${status}) before its clients started. ${error}`;
    }
    return `No timeline: no client of this ${live.progress.status} run reported its phases.`;
  }

  let timelineDrawn = [];

  function drawTimeline() {
    const chart = element("timeline-chart");
    const rows = charts.timeline;
    if (!rows.some((row) => row.phases.length)) {
      timelineDrawn = timelineRows(rows);
      message(chart, emptyTimelineMessage(), live.error ? "error" : "empty");
      return;
    }
    const ordered = orderedClients(rows, option("order").value);
    timelineDrawn = timelineRows(ordered);
    const labels = ordered.map((row) => clientLabel(row.client));
    const layout = fedprobe.layout({
      barmode: "overlay",
      height: sized(chart, rowsHeight(ordered.length, 260)),
      xaxis: {
        title: { text: "seconds from the release of the clients (s)" },
        rangemode: "tozero",
      },
      yaxis: {
        title: { text: "client" },
        type: "category",
        categoryorder: "array",
        categoryarray: labels,
        // First client on top, no empty rows around them (the markers' autorange pads).
        range: [labels.length - 0.5, -0.5],
        automargin: true,
      },
      legend: { orientation: "h", y: 1.02, yanchor: "bottom", x: 0 },
      // Room for the legend above and "client 999" beside: a margin pushed by either
      // makes Plotly draw the chart twice.
      margin: { t: 76, r: 20, b: 60, l: 100 },
      uirevision: "timeline",
    });
    chart.replaceChildren();
    return Plotly.react(chart, ganttTraces(timelineDrawn), layout, fedprobe.config);
  }

  // -- latency histograms ---------------------------------------------------------------

  const PERCENTILES = ["p50", "p90", "p99"];
  const LATENCY_HEIGHT = 300;
  let latencyDrawn = [];

  /** A histogram as a step line: each bucket flat from its lower to its upper edge, down to
      zero across the gaps between non-empty buckets. */
  function stepLine(buckets) {
    const x = [];
    const y = [];
    const custom = [];
    buckets.forEach((bucket, i) => {
      const previous = buckets[i - 1];
      if (previous && previous.upper_us < bucket.lower_us) {
        x.push(previous.upper_us);
        y.push(0);
        custom.push([previous.upper_us, bucket.lower_us, 0]);
      }
      x.push(bucket.lower_us);
      y.push(bucket.count);
      custom.push([bucket.lower_us, bucket.upper_us, bucket.count]);
    });
    const last = buckets[buckets.length - 1];
    x.push(last.upper_us);
    y.push(last.count);
    custom.push([last.lower_us, last.upper_us, last.count]);
    return { x, y, custom };
  }

  /** "1 operation", "12 operations". */
  function operations(count) {
    return `${count} operation${count === 1 ? "" : "s"}`;
  }

  /** Counts are whole: a linear axis steps by at least 1 (a one-operation histogram had
      ticks at 0.2, 0.4 ...); a log axis takes logTicks, whole from 1 up. */
  function countAxis(hist, logCounts) {
    const counts = hist.buckets.map((b) => b.count);
    if (logCounts) return { type: "log", ...fedprobe.logTicks(counts) };
    const most = Math.max(...counts);
    return { type: "linear", rangemode: "tozero", tickformat: ",d", ...(most < 10 ? { dtick: 1 } : {}) };
  }

  function latencyLayout(kind, hist, logCounts) {
    const shapes = [];
    const annotations = [];
    PERCENTILES.forEach((name, i) => {
      const value = hist[name];
      if (!(value > 0)) return;
      shapes.push({
        type: "line", xref: "x", yref: "paper", x0: value / 1000, x1: value / 1000, y0: 0, y1: 1,
        line: { color: colours.black, width: 1, dash: ["dot", "dash", "longdash"][i] },
      });
      annotations.push({
        // On a log axis an annotation is placed in log units (a shape in data units).
        x: Math.log10(value / 1000), xref: "x", yref: "paper", y: 1 - 0.09 * i, yanchor: "top",
        text: `${name} ${fedprobeUnits.latencyUs(value)}`,
        showarrow: false, xanchor: "left", font: { size: 11 },
        bgcolor: fedprobe.rgba(colours.background, 0.8),
      });
    });
    return fedprobe.layout({
      title: { text: `${fedprobe.text(kind)}: ${operations(hist.count)}`, font: { size: 14 } },
      height: LATENCY_HEIGHT,
      showlegend: false,
      margin: { t: 40, r: 20, b: 55, l: 60 },
      // In ms, as the rest of the page (the buckets' edges stay µs in the downloads).
      xaxis: {
        type: "log",
        title: { text: "latency (ms)" },
        ...fedprobe.logTicks(hist.buckets.flatMap((b) => [b.lower_us / 1000, b.upper_us / 1000])),
      },
      yaxis: { title: { text: "operations" }, ...countAxis(hist, logCounts) },
      shapes,
      annotations,
      uirevision: kind,
    });
  }

  function drawLatency() {
    const container = element("latency-charts");
    const kinds = Object.keys(charts.latency_hist);
    latencyDrawn = [];
    if (!kinds.length) {
      container.classList.remove("chart-grid");
      message(container, live.final
        ? "No latencies: no client of this run completed an operation."
        : "The latency histograms appear when the run ends.");
      return;
    }
    container.classList.add("chart-grid");
    const logCounts = option("counts").value === "log";
    // Every chart's element first, so that each is drawn at its final width in the grid.
    const elements = kinds.map((kind) => {
      let chart = container.querySelector(`[data-kind="${CSS.escape(kind)}"]`);
      if (!chart) {
        chart = document.createElement("div");
        chart.className = "chart chart-short";
        chart.dataset.kind = kind;
        sized(chart, LATENCY_HEIGHT);
        container.appendChild(chart);
      }
      return chart;
    });
    return Promise.all(kinds.map((kind, i) => {
      const hist = charts.latency_hist[kind];
      const chart = elements[i];
      const step = stepLine(hist.buckets);
      const trace = {
        type: "scatter",
        mode: "lines",
        name: fedprobe.text(kind),
        x: step.x.map((us) => us / 1000),
        y: step.y,
        line: { shape: "hv", color: fedprobe.colour(i), width: 1.5 },
        fill: logCounts ? "none" : "tozeroy",
        customdata: step.custom.map(([lower, upper, count]) =>
          [fedprobeUnits.latencyUs(lower), fedprobeUnits.latencyUs(upper), operations(count)]),
        hovertemplate: "%{customdata[0]} to %{customdata[1]}: %{customdata[2]}<extra></extra>",
      };
      for (const bucket of hist.buckets) latencyDrawn.push({ kind, series: "bucket", ...bucket });
      for (const name of PERCENTILES) {
        const at = hist[name];
        latencyDrawn.push({ kind, series: name, lower_us: at, upper_us: at, count: "" });
      }
      return Plotly.react(chart, [trace], latencyLayout(kind, hist, logCounts), fedprobe.config);
    }));
  }

  // -- data servers -----------------------------------------------------------------------

  let serversDrawn = [];

  function drawServers() {
    const chart = element("served-chart");
    const rows = charts.served_by_clients;
    serversDrawn = rows.map((row) => ({
      server: row.server,
      clients_ok: row.ok,
      clients_failed: row.failed,
      clients: row.clients.join(" "),
    }));
    if (!rows.length) {
      message(chart, live.final
        ? "No data server: no client of this run opened the file."
        : "The data servers appear when the run ends.");
      return;
    }
    const names = rows.map((row) => fedprobe.text(row.server));
    const listed = rows.map((row) => {
      const shown = row.clients.slice(0, 40).join(", ");
      return row.clients.length > 40 ? `${shown}, …` : shown;
    });
    const bars = (name, key, color) => ({
      type: "bar",
      orientation: "h",
      name,
      y: names,
      x: rows.map((row) => row[key]),
      marker: { color },
      customdata: listed,
      hovertemplate: `%{y}: %{x} clients ${name}<br>clients %{customdata}<extra></extra>`,
    });
    const layout = fedprobe.layout({
      barmode: "stack",
      height: sized(chart, Math.max(200, 110 + 36 * rows.length)),
      xaxis: {
        title: { text: "clients served" },
        rangemode: "tozero",
        dtick: rows.some((r) => r.clients.length > 10) ? undefined : 1, // whole clients
      },
      yaxis: { type: "category", automargin: true, autorange: "reversed" },
      legend: { orientation: "h", y: 1.02, yanchor: "bottom", x: 0, traceorder: "normal" },
      margin: { t: 40, r: 20, b: 50, l: 80 },
    });
    chart.replaceChildren();
    const traces = [bars("ended well", "ok", OK_COLOUR), bars("failed", "failed", ERROR_COLOUR)];
    return Plotly.react(chart, traces, layout, fedprobe.config);
  }

  // -- live progress --------------------------------------------------------------------

  let progressDrawn = [];

  function statusColour(status) {
    if (status === "ok" || status === "succeeded") return OK_COLOUR;
    if (status === "running" || status === "queued") return colours.blue;
    return ERROR_COLOUR;
  }

  function drawProgress(run) {
    const chart = element("timeline-chart");
    const note = element("timeline-note");
    if (run.status === "queued") {
      progressDrawn = [];
      note.textContent = "The timeline appears once a worker has taken the run.";
      message(chart,
        `Waiting for a worker on queue ${live.queue}: one is started with ` +
        `"celery -A webapp worker -Q ${live.queue}".`);
      return;
    }
    note.textContent = "Live: what each client has read of what it plans to read, updated every " +
      "2 s. Each client's phases, first byte and errors appear when the run ends.";
    const clients = run.clients;
    progressDrawn = clients.map((c) => ({
      client: c.client, status: c.status, bytes_read: c.bytes_read, bytes_planned: c.bytes_planned,
    }));
    const labels = clients.map((c) => clientLabel(c.client));
    const read = clients.map((c) => c.bytes_read / MiB);
    const left = clients.map((c) => Math.max(0, c.bytes_planned - c.bytes_read) / MiB);
    const hover = clients.map((c) => [
      fedprobe.text(c.status),
      fedprobeUnits.size(c.bytes_read),
      fedprobeUnits.size(c.bytes_planned),
    ]);
    const hovertemplate =
      "%{y} (%{customdata[0]}): %{customdata[1]} of %{customdata[2]}<extra></extra>";
    const traces = [
      {
        type: "bar", orientation: "h", name: "read", y: labels, x: read,
        marker: { color: clients.map((c) => statusColour(c.status)) },
        customdata: hover,
        hovertemplate,
      },
      {
        type: "bar", orientation: "h", name: "still to read", y: labels, x: left,
        marker: { color: PENDING_COLOUR }, customdata: hover, hovertemplate,
      },
    ];
    const layout = fedprobe.layout({
      barmode: "stack",
      height: sized(chart, rowsHeight(clients.length, 220)),
      xaxis: { title: { text: "bytes read (MiB)" }, rangemode: "tozero" },
      yaxis: {
        type: "category",
        categoryorder: "array",
        categoryarray: labels,
        autorange: "reversed",
        automargin: true,
      },
      legend: { orientation: "h", y: 1.02, yanchor: "bottom", x: 0 },
      margin: { t: 40, r: 20, b: 50, l: 80 },
      uirevision: "progress",
    });
    if (!chart.classList.contains("js-plotly-plot")) chart.replaceChildren();
    chart.dataset.bytesRead = String(run.bytes_read);
    return Plotly.react(chart, traces, layout, fedprobe.config);
  }

  function showRun(run) {
    fedprobeLive.showStatus(element("run-status"), run.status);
    fedprobeLive.showProgress(element("run-progress"), run);
    for (const client of run.clients) {
      const row = document.querySelector(`#clients tr[data-client="${client.client}"]`);
      if (!row) continue;
      fedprobeLive.showStatus(row.querySelector("[data-role='status']"), client.status);
      row.querySelector("[data-role='client-bytes']").textContent = String(client.bytes_read);
      const clientBar = row.querySelector("progress");
      clientBar.max = client.bytes_planned || 1;
      clientBar.value = client.bytes_read;
    }
    drawProgress(run);
  }

  /** A poll's answer: false (stop) once the run is gone or has ended. */
  function showPolled([run]) {
    if (!run) return false;
    showRun(run);
    if (!run.final) return true;
    window.location.reload(); // the server renders the results and the final charts
    return false;
  }

  // -- wiring -----------------------------------------------------------------------------

  // An ended run's timeline is drawn at once; the charts below it once the page has loaded,
  // each in its own task when the browser is idle, or sooner if they come near the screen,
  // so that the page answers while they are drawn. A drawn chart's card has data-drawn
  // (benches/page_interactive.py waits for it).
  const FINAL_CHARTS = { timeline: drawTimeline, latency: drawLatency, served: drawServers };
  const stale = new Set();

  function drawNow(name) {
    if (!stale.delete(name)) return;
    const card = element(`${name}-card`);
    Promise.resolve(FINAL_CHARTS[name]()).then(() => {
      card.dataset.drawn = "";
      performance.mark(`run:drawn:${name}`);
    });
  }

  /** The task once the page has loaded and shown a frame since. */
  function afterLoad(task) {
    const start = () => requestAnimationFrame(task);
    if (document.readyState === "complete") start();
    else window.addEventListener("load", start, { once: true });
  }

  const whenIdle = (task) =>
    window.requestIdleCallback ? requestIdleCallback(task, { timeout: 500 }) : setTimeout(task);

  function drawInTurn(names) {
    const [name, ...rest] = names;
    if (!name) return;
    whenIdle(() => {
      drawNow(name);
      drawInTurn(rest);
    });
  }

  function drawNear(names) {
    const observer = new IntersectionObserver(
      (entries) => {
        for (const entry of entries) {
          if (!entry.isIntersecting) continue;
          observer.unobserve(entry.target);
          drawNow(entry.target.dataset.chart);
        }
      },
      { rootMargin: "300px 0px" },
    );
    for (const name of names) {
      const card = element(`${name}-card`);
      card.dataset.chart = name;
      observer.observe(card);
    }
  }

  function drawFinal() {
    for (const name of Object.keys(FINAL_CHARTS)) stale.add(name);
    drawNow("timeline");
    const below = ["latency", "served"];
    drawNear(below);
    afterLoad(() => drawInTurn(below));
  }

  /** A chart's rows for its downloads, drawn first if they have not been yet. */
  const drawnRows = (name, rows) => () => {
    drawNow(name);
    return rows();
  };

  performance.mark("run:script");
  restoreControls();
  const wire = (card, name, rows, columns) =>
    fedprobe.downloads(element(card), `run-${live.run}-${name}`, rows, columns);
  if (live.final) {
    wire("timeline-card", "timeline", () => timelineDrawn, TIMELINE_COLUMNS);
  } else {
    wire("timeline-card", "progress", () => progressDrawn, PROGRESS_COLUMNS);
  }
  wire("latency-card", "latency", drawnRows("latency", () => latencyDrawn), LATENCY_COLUMNS);
  wire("served-card", "servers", drawnRows("served", () => serversDrawn), SERVER_COLUMNS);
  // Each control redraws its own chart.
  const redrawn = { order: "timeline", counts: "latency" };
  document.querySelectorAll("[form='run-chart-controls']").forEach((select) => {
    select.addEventListener("change", () => {
      fedprobe.permalink(controls);
      if (!live.final) return;
      stale.add(redrawn[select.name]);
      drawNow(redrawn[select.name]);
    });
  });

  if (live.final) {
    drawFinal();
  } else {
    drawProgress(live.progress);
    drawLatency();
    drawServers();
    fedprobeLive.poll(() => live.status_url, showPolled);
  }
})();
