"""The engine and the lab stay free of Django and Celery (they run outside the web app)."""

import subprocess
import sys


def test_engine_and_lab_load_neither_django_nor_celery() -> None:
    code = (
        "import sys, workers.engine, workers.engine.cli, workers.engine.driver, workers.lab\n"
        "import workers.engine.backends.xroot, workers.engine.backends.http\n"
        "import workers.engine.backends.gridftp, workers.engine.backends.local\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'celery', 'kombu', 'rest_framework', 'webapp'))\n"
        "print(loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
