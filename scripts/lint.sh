#!/usr/bin/env bash
# The first stage of `make test`: ruff over agentmemory/, chat/ and config/,
# then mypy (django-stubs and the DRF plugin) over agentmemory/ and chat/;
# either one's findings fail it. pyproject.toml holds both configurations.
# mypy's plugin loads config.settings, which needs DEBUG or SECRET_KEY: the
# local development defaults are enough, nothing is served. mypy keeps its
# cache in .mypy_cache (a few seconds warm, about a minute cold).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
status=0
"$BIN/ruff" check --no-cache agentmemory chat config || status=1
env -u DATABASE_URL DEBUG=1 "$BIN/mypy" || status=1
exit $status
