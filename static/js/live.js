/* What the live pages share (the runs list, the home page's latest runs, a run's page): a
   run's status badge and progress drawn from the status view's JSON, and the poll that asks
   for it every 2 s. Loaded by those pages' templates before their own script; sizes are
   written by units.js. */
"use strict";

const fedprobeLive = (() => {
  const POLL_MS = 2000;

  /** A status badge as the templates render it: `<span class="badge status-running">`. */
  function showStatus(badge, status) {
    badge.textContent = status;
    badge.className = `badge status-${status}`;
  }

  /** A run's progress (templates/campaigns/progress.html): its bar and "bytes of planned". */
  function showProgress(container, run) {
    if (!container) return;
    const bar = container.querySelector("progress");
    if (run.percent !== null) {
      bar.value = run.percent;
      bar.textContent = `${run.percent}%`;
    }
    container.querySelector("[data-role='bytes']").textContent =
      `${fedprobeUnits.size(run.bytes_read)} of ${fedprobeUnits.size(run.bytes_planned)}`;
  }

  /** Every POLL_MS, fetch `url()` (none: stop) and hand its runs to `show(runs)`; polling
      stops when `show` returns false or the server answers other than 200 (signed out, or
      no longer allowed), and goes on after a network error or a server hiccup. */
  function poll(url, show) {
    async function tick() {
      const target = url();
      if (!target) return;
      try {
        const response = await fetch(target, {
          headers: { Accept: "application/json" },
          credentials: "same-origin",
          redirect: "manual",
        });
        if (!response.ok) return;
        if (show((await response.json()).runs) === false) return;
      } catch (error) {
        // Try again at the next tick.
      }
      window.setTimeout(tick, POLL_MS);
    }
    window.setTimeout(tick, POLL_MS);
  }

  return { POLL_MS, showStatus, showProgress, poll };
})();
