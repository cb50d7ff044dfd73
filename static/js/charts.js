/* Shared by the chart pages: data in, safe text, seconds, colour-blind-safe colours,
   downloads, permalinks, empty and error states. Each page has its own small script that
   uses this (and units.js for sizes, rates and latencies).
   Nothing here builds HTML from data: text goes in through textContent, and text handed
   to Plotly (which reads a few HTML-like tags in labels) has its markup escaped. */
"use strict";

const fedprobe = (() => {
  // Every colour a chart uses. Okabe-Ito: distinguishable with the common colour-vision
  // deficiencies (its grey for what nobody let finish); the page's own greys come from the
  // stylesheet's variables (static/css/fedprobe.css), so charts and pages agree.
  const okabeIto = {
    blue: "#0072B2",
    orange: "#E69F00",
    green: "#009E73",
    reddishPurple: "#CC79A7",
    skyBlue: "#56B4E9",
    vermillion: "#D55E00",
    yellow: "#F0E442",
    black: "#000000",
  };
  // Series take these in turn (fedprobe.colour(i)).
  const palette = Object.values(okabeIto);

  function pageColour(variable, fallback) {
    const value = getComputedStyle(document.documentElement).getPropertyValue(variable).trim();
    return value || fallback;
  }

  const colours = {
    ...okabeIto,
    grey: "#999999",
    muted: pageColour("--muted", "#57606a"),
    line: pageColour("--line", "#d0d7de"),
    background: pageColour("--bg", "#ffffff"),
  };

  /** The JSON a template passed with json_script. */
  function data(id) {
    const element = document.getElementById(id);
    return element ? JSON.parse(element.textContent) : null;
  }

  /** User text for Plotly titles, legends and hovers: its markup shown, never interpreted. */
  function text(value) {
    return String(value ?? "")
      .replace(/&/g, "&amp;")
      .replace(/</g, "&lt;")
      .replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;");
  }

  /** Seconds with their unit, so no two ticks read alike: 0.02 -> "20 ms", 2 -> "2 s". */
  function formatSeconds(seconds) {
    if (seconds < 1) return `${Number((seconds * 1000).toPrecision(3))} ms`;
    return `${Number(seconds.toPrecision(3))} s`;
  }

  /** A number in full, to three significant digits: 200 -> "200", 0.035 -> "0.035". */
  function formatNumber(value) {
    return Number(value.toPrecision(3)).toLocaleString("en-US", { maximumFractionDigits: 6 });
  }

  /** Ticks for a log axis spanning `values`, each labelled in full by `format` (Plotly's own
      label minor ticks with one digit, so 200 reads "2" and 0.2 s and 2 s look alike). 1, 2
      and 5 of each decade for up to three decades; every decade for up to six; else every
      other one; 1, 2, 3, 5 and 7 when the values lie within one decade. */
  function logTicks(values, format = formatNumber) {
    const positive = values.filter((v) => v > 0 && Number.isFinite(v));
    if (!positive.length) return {};
    const low = Math.floor(Math.log10(Math.min(...positive)));
    const high = Math.ceil(Math.log10(Math.max(...positive)));
    const decades = Math.max(1, high - low);
    const steps = decades <= 1 ? [1, 2, 3, 5, 7] : decades <= 3 ? [1, 2, 5] : [1];
    const every = decades > 6 ? 2 : 1;
    const tickvals = [];
    for (let power = low; power <= high; power += every) {
      for (const step of steps) tickvals.push(Number((step * 10 ** power).toPrecision(3)));
    }
    return { tickvals, ticktext: tickvals.map(format), tickmode: "array" };
  }

  /** Ticks for a log axis of seconds: logTicks labelled "20 ms", "2 s". */
  function secondsTicks(values) {
    return logTicks(values, formatSeconds);
  }

  function colour(index) {
    return palette[index % palette.length];
  }

  /** A colour of `colours` ("#rrggbb"), see-through: rgba("#0072B2", 0.18). */
  function rgba(hex, alpha) {
    const n = parseInt(hex.slice(1), 16);
    return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
  }

  const config = {
    displaylogo: false,
    responsive: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d"],
  };

  function layout(overrides) {
    return Object.assign(
      {
        margin: { t: 40, r: 20, b: 60, l: 70 },
        hovermode: "closest",
        legend: { orientation: "h", y: -0.2 },
        font: { family: "system-ui, sans-serif", size: 13 },
      },
      overrides,
    );
  }

  /** Show `message` in place of a chart (no data, or the data could not be loaded). */
  function showMessage(element, message, kind = "empty") {
    if (window.Plotly) Plotly.purge(element);
    element.replaceChildren();
    const paragraph = document.createElement("p");
    paragraph.className = `chart-message chart-${kind}`;
    paragraph.setAttribute("role", kind === "error" ? "alert" : "status");
    paragraph.textContent = message;
    element.appendChild(paragraph);
  }

  function csvCell(value) {
    const cell = value === null || value === undefined ? "" : String(value);
    return /[",\n\r]/.test(cell) ? `"${cell.replace(/"/g, '""')}"` : cell;
  }

  /** rows: objects; columns: the keys, in order. */
  function toCsv(rows, columns) {
    const lines = [columns.map(csvCell).join(",")];
    for (const row of rows) lines.push(columns.map((key) => csvCell(row[key])).join(","));
    return lines.join("\r\n") + "\r\n";
  }

  function save(filename, type, body) {
    const url = URL.createObjectURL(new Blob([body], { type }));
    const link = document.createElement("a");
    link.href = url;
    link.download = filename;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  /** Wire a chart's CSV and JSON buttons to exactly the rows it draws (`rows()` is called
      at click time, so the download follows the controls). */
  function downloads(container, basename, rows, columns) {
    container.querySelector("[data-download=csv]")?.addEventListener("click", () => {
      save(`${basename}.csv`, "text/csv", toCsv(rows(), columns));
    });
    container.querySelector("[data-download=json]")?.addEventListener("click", () => {
      save(`${basename}.json`, "application/json", JSON.stringify(rows(), null, 2));
    });
  }

  /** Keep a form's controls in the URL's query string (a permalink), without reloading. */
  function permalink(form) {
    const params = new URLSearchParams(new FormData(form));
    for (const [key, value] of [...params]) if (value === "") params.delete(key);
    const query = params.toString();
    history.replaceState(null, "", query ? `?${query}` : location.pathname);
  }

  return {
    palette, colours, data, text, formatSeconds, formatNumber, logTicks, secondsTicks, colour, rgba, config, layout,
    showMessage, toCsv, downloads, permalink,
  };
})();
