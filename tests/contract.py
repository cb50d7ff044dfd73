"""The run JSON fields of docs/engine.md, carried by the CLI's --json and the API's run detail."""

RUN_KEYS = frozenset(
    {
        "status",
        "params",
        "wall_s",
        "open_s",
        "ttfb_s",
        "throughput_mbps",
        "ops",
        "op_latency_us",
        "bytes_requested",
        "bytes_read",
        "bytes_wire",
        "cpu_s",
        "served_by",
        "errors",
        "clients",
    }
)
