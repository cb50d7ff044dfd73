/* How every page writes figures, as the templates' filters do (webapp/core/templatetags/
   units.py): sizes in binary units (1 MiB = 1,048,576 bytes), rates in MB/s (10^6 bytes/s),
   latencies under 1 ms in µs and from 1 ms in ms. Loaded by base.html before the page's own
   script: `fedprobeUnits.size(1536)` -> "1.5 KiB". */
"use strict";

const fedprobeUnits = (() => {
  const SIZE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

  /** Up to one decimal, without a trailing ".0": 1.5, 16, 0.3. */
  function short(value) {
    return String(Number(value.toFixed(1)));
  }

  /** Bytes, binary: 4096 -> "4 KiB", 16777216 -> "16 MiB". */
  function size(bytes) {
    if (bytes === null || bytes === undefined || Number.isNaN(bytes)) return "";
    let value = Number(bytes);
    let unit = 0;
    while (Math.abs(value) >= 1024 && unit < SIZE_UNITS.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return `${short(value)} ${SIZE_UNITS[unit]}`;
  }

  /** A rate in MB/s (10^6 bytes/s), as the run JSON's throughput_mbps: "968.4 MB/s". */
  function rate(mbps, digits = 1) {
    if (mbps === null || mbps === undefined || Number.isNaN(mbps)) return "";
    return `${Number(mbps).toFixed(digits)} MB/s`;
  }

  /** A latency given in µs: 850 -> "850 µs", 1234 -> "1.23 ms", 45678 -> "45.7 ms". */
  function latencyUs(us) {
    if (us === null || us === undefined || Number.isNaN(us)) return "";
    const value = Number(us);
    if (Math.abs(value) < 999.5) return `${Math.round(value)} µs`;
    const ms = value / 1000;
    const digits = Math.abs(ms) < 10 ? 2 : Math.abs(ms) < 100 ? 1 : 0;
    return `${ms.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })} ms`;
  }

  /** A duration given in seconds: under 1 s as a latency ("26.1 ms"), else "3.25 s". */
  function seconds(s) {
    if (s === null || s === undefined || Number.isNaN(s)) return "";
    const value = Number(s);
    if (Math.abs(value) < 1) return latencyUs(value * 1e6);
    const digits = Math.abs(value) < 100 ? 2 : 0;
    return `${value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })} s`;
  }

  return { size, rate, latencyUs, seconds };
})();
