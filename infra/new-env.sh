#!/usr/bin/env bash
# Generate the credentials infra/docker-compose.yml requires (it has no defaults) into a Compose env file:
#   infra/new-env.sh [FILE]     FILE defaults to infra/.env, which Compose reads beside the compose file
# Written with mode 0600 and never overwritten (a second run would lock the stack out of its own database and
# bucket); git ignores infra/.env. Letters and digits only, so each value is safe in a URL and a shell.
set -euo pipefail
out="${1:-$(dirname "$0")/.env}"
if [[ -e "$out" ]]; then
  echo "new-env: $out exists; it holds the credentials the stack's volumes were made with, so it is kept" >&2
  exit 1
fi
random() { LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c "$1" || true; }
umask 077
cat >"$out" <<ENV
# made by infra/new-env.sh; every service of infra/docker-compose.yml reads it. Keep it secret.
POSTGRES_PASSWORD=$(random 32)
MINIO_ROOT_USER=ttseval-$(random 8)
MINIO_ROOT_PASSWORD=$(random 40)
PREFECT_API_AUTH_STRING=ttseval:$(random 32)
ENV
echo "new-env: wrote $out (mode 0600): POSTGRES_PASSWORD, MINIO_ROOT_USER, MINIO_ROOT_PASSWORD, PREFECT_API_AUTH_STRING" >&2
