# The kgflow image: every processor and the gateway (`kgflow run NAME`), the CLI, the flows.
# Used by docker-compose.yml; build with `docker build -t kgflow .`.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    KGFLOW_HOME=/data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY processors ./processors
COPY flows ./flows
COPY examples ./examples
RUN pip install -e '.[distributed]' \
    && useradd --create-home --uid 10001 kgflow \
    && mkdir -p /data && chown kgflow /data

USER kgflow
VOLUME ["/data"]
CMD ["kgflow", "--help"]
