// The regression page's plot: the series' nightly medians (quartiles as error bars), the
// baseline window's band (median ± k·MAD) shaded over it, the target window tinted, the
// change night as a dashed line, version changes marked, and the other vantage points'
// nights of the same endpoint and parameter set as dotted lines. Names reach Plotly through
// fedprobe.text only.
(function () {
  "use strict";

  const data = fedprobe.data("regression-data");
  const element = document.getElementById("regression-plot");
  if (!data || !element || !data.nights.length) return;
  const colours = fedprobe.colours;
  const unit = data.unit === "share of runs" ? "" : ` (${data.unit})`;
  const measured = data.nights.filter((night) => night.value !== null);

  function errorBars(nights) {
    const hasQuartiles = nights.some((night) => night.q1 !== null && night.q3 !== null);
    if (!hasQuartiles) return undefined;
    return {
      type: "data",
      symmetric: false,
      array: nights.map((night) => (night.q3 === null ? 0 : night.q3 - night.value)),
      arrayminus: nights.map((night) => (night.q1 === null ? 0 : night.value - night.q1)),
      color: fedprobe.rgba(colours.blue, 0.5),
      thickness: 1,
      width: 0,
    };
  }

  const traces = [
    {
      type: "scatter",
      mode: "lines+markers",
      name: fedprobe.text(`${data.vantage_point || "this series"}`),
      x: measured.map((night) => night.night),
      y: measured.map((night) => night.value),
      error_y: errorBars(measured),
      customdata: measured.map((night) => [
        night.n,
        fedprobe.text(night.server_versions.join(", ")),
        fedprobe.text((night.client_versions || []).join(", ")),
      ]),
      hovertemplate: `%{x}: %{y:.4g}${fedprobe.text(unit)}<br>n = %{customdata[0]}` +
        "<br>server %{customdata[1]}<br>client %{customdata[2]}<extra></extra>",
      line: { color: colours.blue, width: 2 },
      marker: { size: 6 },
    },
  ];
  data.others.forEach((other, index) => {
    const nights = other.nights.filter((night) => night.value !== null);
    traces.push({
      type: "scatter",
      mode: "lines+markers",
      name: fedprobe.text(other.vantage_point),
      x: nights.map((night) => night.night),
      y: nights.map((night) => night.value),
      hovertemplate: `${fedprobe.text(other.vantage_point)} %{x}: %{y:.4g}<extra></extra>`,
      line: { color: fedprobe.colour(index + 1), dash: "dot", width: 1 },
      marker: { size: 4 },
    });
  });

  const shapes = [];
  const annotations = [];
  const first = data.nights[0].night;
  const last = data.nights[data.nights.length - 1].night;
  if (data.band) {
    shapes.push({
      type: "rect", xref: "x", yref: "y", x0: first, x1: last, y0: data.band.low,
      y1: data.band.high, fillcolor: fedprobe.rgba(colours.green, 0.12), line: { width: 0 },
      layer: "below",
    });
    shapes.push({
      type: "line", xref: "x", yref: "y", x0: first, x1: last, y0: data.band.median,
      y1: data.band.median, line: { color: colours.green, width: 1, dash: "dash" },
    });
  }
  if (data.windows.target) {
    const [from, to] = data.windows.target;
    shapes.push({
      type: "rect", xref: "x", yref: "paper", x0: from, x1: to, y0: 0, y1: 1,
      fillcolor: fedprobe.rgba(colours.orange, 0.1), line: { width: 0 }, layer: "below",
    });
  }
  if (data.change_night) {
    shapes.push({
      type: "line", xref: "x", yref: "paper", x0: data.change_night, x1: data.change_night,
      y0: 0, y1: 1, line: { color: colours.vermillion, width: 2, dash: "dash" },
    });
    annotations.push({
      x: data.change_night, y: 1, xref: "x", yref: "paper", yanchor: "bottom",
      text: `change ${data.change_night}`, showarrow: false,
      font: { color: colours.vermillion },
    });
  }
  (data.versions || []).forEach((change) => {
    if (!change || typeof change !== "object" || !change.first_seen) return;
    annotations.push({
      x: change.first_seen, y: 0, xref: "x", yref: "paper", yanchor: "top", showarrow: true,
      ax: 0, ay: 24,
      text: fedprobe.text(`${change.kind || "server"} ${change.version || ""}`),
      font: { size: 11, color: colours.muted },
    });
  });

  const layout = fedprobe.layout({
    xaxis: { type: "date", title: { text: "night (UTC)" } },
    yaxis: { title: { text: fedprobe.text(`${data.metric}${unit}`) }, rangemode: "tozero" },
    shapes,
    annotations,
    showlegend: true,
  });
  Plotly.newPlot(element, traces, layout, fedprobe.config);
})();
