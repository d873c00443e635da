# Parley's API and worker image. compose.yaml runs it as `parley migrate` (once), `parley serve --no-migrate
# --no-worker` (API processes) and `parley worker --no-migrate` (background work); docs/operations.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PARLEY_VAR_DIR=/var/lib/parley

# the offline voice speaks through eSpeak NG (docs/agents.md)
RUN apt-get update && apt-get install -y --no-install-recommends espeak-ng && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY domain ./domain
COPY application ./application
COPY adapters ./adapters
COPY entrypoints ./entrypoints
RUN pip install . \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/parley --create-home parley

USER parley
EXPOSE 8000
ENTRYPOINT ["parley"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
