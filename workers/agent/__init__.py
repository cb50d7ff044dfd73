"""The agent of a remote vantage point: it enrols with a fedprobe server, then measures the
runs sent to its own queue, holding none of the central secrets (docs/vantage-points.md).

It claims each run over HTTPS from the server (authenticated by the agent token it got at
enrolment), receives the run's credential sealed to its own key, measures with the engine,
and sends progress and results back the same way. No database, no Django."""
