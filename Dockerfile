# Memory Console, as run by docker-compose.yml (web, worker, beat and the migrate one-shot).
FROM python:3.12-slim

# PYTHONPATH: the top-level templates/ and static/ folders are not part of the wheel, so the
# code runs from the source tree (settings find both beside the memoryconsole package); the
# installed distribution provides the dependencies and the console scripts.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=memoryconsole.settings \
    MEMORYCONSOLE_HOME=/var/lib/memoryconsole \
    PYTHONPATH=/app

# curl: the web service's health check.
RUN apt-get update \
    && apt-get install --yes --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY . /app
RUN pip install . \
    && useradd --system --uid 10001 --home-dir /var/lib/memoryconsole memoryconsole \
    && mkdir -p /var/lib/memoryconsole \
    && chown memoryconsole:memoryconsole /var/lib/memoryconsole

# Never root: the application only needs its home (beat schedule, static root).
USER memoryconsole

EXPOSE 8000
CMD ["gunicorn", "memoryconsole.wsgi", "--config=python:memoryconsole.gunicorn_conf", "--bind=0.0.0.0:8000", "--workers=3"]
