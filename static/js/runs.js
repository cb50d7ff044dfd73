// The runs list, live: every 2 s the rows of queued and running runs ask the status view how
// far they are, until none is left. Without JavaScript the page shows the status it was
// rendered with.
(function () {
  "use strict";

  const POLL_MS = 2000;
  const live = JSON.parse(document.getElementById("runs-live").textContent);

  function activeRows() {
    return Array.from(document.querySelectorAll("tr[data-run-id][data-final='false']"));
  }

  function showProgress(container, run) {
    if (!container) {
      return;
    }
    const bar = container.querySelector("progress");
    if (run.percent !== null) {
      bar.value = run.percent;
      bar.textContent = `${run.percent}%`;
    }
    container.querySelector("[data-role='bytes']").textContent =
      `${fedprobeUnits.size(run.bytes_read)} of ${fedprobeUnits.size(run.bytes_planned)}`;
  }

  function update(row, run) {
    const badge = row.querySelector("[data-role='status']");
    badge.textContent = run.status;
    badge.className = `badge status-${run.status}`;
    showProgress(row.querySelector("[data-role='progress']"), run);
    if (run.final) {
      row.dataset.final = "true";
    }
  }

  async function poll() {
    const rows = activeRows();
    if (!rows.length) {
      return;
    }
    const ids = rows.map((row) => row.dataset.runId).join(",");
    try {
      const response = await fetch(`${live.status_url}?ids=${ids}`, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
        redirect: "manual",
      });
      if (!response.ok) {
        return; // signed out, or no longer allowed: stop polling
      }
      const data = await response.json();
      for (const run of data.runs) {
        const row = document.querySelector(`tr[data-run-id="${run.id}"]`);
        if (row) {
          update(row, run);
        }
      }
    } catch (error) {
      // The network or the server hiccuped: try again at the next tick.
    }
    window.setTimeout(poll, POLL_MS);
  }

  window.setTimeout(poll, POLL_MS);
})();
