# Memory Console, as run by docker-compose.yml (web, worker, beat and the migrate one-shot).
# Python 3.11, as CI: requirements.lock is resolved for it.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=memoryconsole.settings \
    MEMORYCONSOLE_HOME=/var/lib/memoryconsole \
    MEMORYCONSOLE_STATIC_COLLECTED=true

# No curl or other tool for the health checks: `memoryconsole healthcheck` is the image's own.

# The dependencies alone, hash-checked from the lockfile: this layer is built again only
# when the lockfile changes, not with every change of the code.
COPY requirements.lock /tmp/requirements.lock
RUN pip install --require-hashes --no-deps -r /tmp/requirements.lock

# The application, installed as a wheel (templates and static files inside the package);
# pip check proves the lockfile satisfies it. collectstatic writes the compressed copies
# whitenoise serves (MEMORYCONSOLE_STATIC_COLLECTED above); it starts no database.
COPY . /tmp/src
RUN pip install --no-deps /tmp/src \
    && pip check \
    && rm -rf /tmp/src \
    && useradd --system --uid 10001 --home-dir /var/lib/memoryconsole memoryconsole \
    && mkdir -p /var/lib/memoryconsole \
    && memoryconsole collectstatic --no-input --verbosity 0 \
    && chown -R memoryconsole:memoryconsole /var/lib/memoryconsole

# Never root: the application only needs its home (collected static files). By uid, so that
# an orchestrator can check it is not root without the image's /etc/passwd.
USER 10001
WORKDIR /var/lib/memoryconsole

EXPOSE 8000
CMD ["gunicorn", "memoryconsole.wsgi", "--config=python:memoryconsole.gunicorn_conf", "--bind=0.0.0.0:8000", "--workers=3"]
