// The runs list, live: every 2 s the rows of queued and running runs ask the status view how
// far they are, until none is left (static/js/live.js draws the badges and progress).
// Without JavaScript the page shows the status it was rendered with.
(function () {
  "use strict";

  const live = JSON.parse(document.getElementById("runs-live").textContent);

  function activeRows() {
    return Array.from(document.querySelectorAll("tr[data-run-id][data-final='false']"));
  }

  function update(row, run) {
    fedprobeLive.showStatus(row.querySelector("[data-role='status']"), run.status);
    fedprobeLive.showProgress(row.querySelector("[data-role='progress']"), run);
    if (run.final) {
      row.dataset.final = "true";
    }
  }

  function statusUrl() {
    const rows = activeRows();
    if (!rows.length) {
      return null;
    }
    return `${live.status_url}?ids=${rows.map((row) => row.dataset.runId).join(",")}`;
  }

  fedprobeLive.poll(statusUrl, (runs) => {
    for (const run of runs) {
      const row = document.querySelector(`tr[data-run-id="${run.id}"]`);
      if (row) {
        update(row, run);
      }
    }
  });
})();
