// A run's page, live while it is queued or running: every 2 s it asks the status view for
// the run's status and each client's bytes, and reloads the page once the run has ended
// (the server then renders the results). Without JavaScript the page shows what it was
// rendered with.
(function () {
  "use strict";

  const POLL_MS = 2000;
  const live = JSON.parse(document.getElementById("run-live").textContent);

  function formatSize(bytes) {
    const units = ["B", "KiB", "MiB", "GiB"];
    let value = bytes;
    let unit = 0;
    while (Math.abs(value) >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return `${Number(value.toFixed(1))} ${units[unit]}`;
  }

  function showStatus(badge, status) {
    badge.textContent = status;
    badge.className = `badge status-${status}`;
  }

  function showRun(run) {
    showStatus(document.getElementById("run-status"), run.status);
    const progress = document.getElementById("run-progress");
    const bar = progress.querySelector("progress");
    if (run.percent !== null) {
      bar.value = run.percent;
      bar.textContent = `${run.percent}%`;
    }
    progress.querySelector("[data-role='bytes']").textContent =
      `${formatSize(run.bytes_read)} of ${formatSize(run.bytes_planned)}`;
    for (const client of run.clients) {
      const row = document.querySelector(`#clients tr[data-client="${client.client}"]`);
      if (!row) {
        continue;
      }
      showStatus(row.querySelector("[data-role='status']"), client.status);
      row.querySelector("[data-role='client-bytes']").textContent = String(client.bytes_read);
      const clientBar = row.querySelector("progress");
      clientBar.max = client.bytes_planned || 1;
      clientBar.value = client.bytes_read;
    }
  }

  async function poll() {
    try {
      const response = await fetch(live.status_url, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
        redirect: "manual",
      });
      if (!response.ok) {
        return; // signed out, or no longer allowed: stop polling
      }
      const [run] = (await response.json()).runs;
      if (!run) {
        return;
      }
      showRun(run);
      if (run.final) {
        window.location.reload();
        return;
      }
    } catch (error) {
      // The network or the server hiccuped: try again at the next tick.
    }
    window.setTimeout(poll, POLL_MS);
  }

  if (!live.final) {
    window.setTimeout(poll, POLL_MS);
  }
})();
