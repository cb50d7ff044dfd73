# fedprobe: one image for the web application, the Celery worker and beat, and the lab
# federation. See docs/deployment.md; docker-compose.yml runs it.
FROM python:3.11-slim-bookworm

# The lab's servers and the copy tools the engine calls (the list of bin/setup).
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        xrootd-server xrootd-client xrootd-plugins xrootd-server-plugins xrootd-scitokens-plugins openssl \
        globus-gridftp-server-progs globus-gass-copy-progs fio \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app \
    DJANGO_SETTINGS_MODULE=webapp.settings \
    FEDPROBE_VAR_DIR=/var/lib/fedprobe \
    FEDPROBE_STATIC_ROOT=/var/lib/fedprobe/static \
    FEDPROBE_LAB_DIR=/var/lib/fedprobe-lab

WORKDIR /app
COPY pyproject.toml requirements.lock README.md ./
COPY webapp ./webapp
COPY workers ./workers
RUN pip install --no-cache-dir -c requirements.lock .
COPY manage.py ./
COPY templates ./templates
COPY static ./static
COPY deploy ./deploy

# web, worker, beat and a remote vantage point's agent run as this user (a volume mounted on
# /var/lib/fedprobe/agent starts as this folder: the agent's); only the lab runs as root (its
# xrootd servers drop to nobody, as in the tested set-up).
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/fedprobe \
        --shell /usr/sbin/nologin fedprobe \
    && mkdir -p /var/lib/fedprobe/static /var/lib/fedprobe/agent /var/lib/fedprobe-lab \
    && chown -R fedprobe:fedprobe /var/lib/fedprobe \
    && chmod 700 /var/lib/fedprobe \
    && chmod 755 /var/lib/fedprobe-lab
USER fedprobe

EXPOSE 8000
CMD ["gunicorn", "webapp.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-", \
     "--logger-class", "webapp.core.access_log.RedactingLogger"]
