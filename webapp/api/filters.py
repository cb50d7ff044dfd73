"""Moved to webapp.campaigns.filters (the run list's filters belong to the runs' app).

Kept until webapp/dashboards/site_summary.py imports with_first_error from there.
"""

from webapp.campaigns.filters import RUN_ORDERING, RunFilter, with_first_error

__all__ = ["RUN_ORDERING", "RunFilter", "with_first_error"]
