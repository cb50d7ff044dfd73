"""The measurement engine: how fast can N clients read a file from an endpoint, this way?

Pure Python, no Django or Celery: usable from the command line (`python -m workers.engine`),
from the web application's workers and from the benchmarks.
"""

from workers.engine.driver import Progress, run_probe, run_probes
from workers.engine.egress import EgressPolicy
from workers.engine.errors import ErrorClass, InvalidParams, ProbeError
from workers.engine.params import Method, Pattern, RunParams
from workers.engine.results import RunResult, RunStatus
from workers.engine.units import parse_size

__all__ = [
    "EgressPolicy",
    "ErrorClass",
    "InvalidParams",
    "Method",
    "Pattern",
    "ProbeError",
    "Progress",
    "RunParams",
    "RunResult",
    "RunStatus",
    "parse_size",
    "run_probe",
    "run_probes",
]
