"""fedprobe workers: the measurement engine (`workers.engine`) and the lab federation
(`workers.lab`).

Nothing in this package imports Django, Celery or the web application: the engine and the lab
are used by the command line, the benchmarks and the tests on their own. The Celery app and
its tasks live in the web application (webapp/celery.py, webapp/campaigns/tasks.py).
"""
