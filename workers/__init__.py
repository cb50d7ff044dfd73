"""fedprobe workers: the measurement engine, the lab federation and (later) the Celery app.

This package must stay importable without Django or Celery: `workers.engine` and
`workers.lab` are used by the command line, the benchmarks and the tests on their own.
"""
