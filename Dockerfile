FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True \
    QUORUM_VAR_DIR=/app/var
WORKDIR /app
# git: reviews of local ranges and change runs (worktrees, merges) under QUORUM_REPO_ROOTS.
RUN apt-get update && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock
COPY . .
RUN SECRET_KEY=build-only python manage.py collectstatic --noinput \
    && useradd --create-home quorum && mkdir -p /app/var /worktrees \
    && chown -R quorum /app/var /worktrees
USER quorum
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "config.asgi:application"]
