# The two commands: `make demo` (the main job) and `make test` (the suite).
PYTHON ?= python3
PIP := $(PYTHON) -m pip
export CTXENGINE_REQUIRE_POSTGRES ?= 1
# tests/test_wheel.py installs dist/'s wheel into a fresh venv; under make it must find one.
export CTXENGINE_REQUIRE_WHEEL ?= 1

.PHONY: help demo test bench docs install system-deps lint cargo-test pytest clean wheel wheels sdist

help:
	@echo "make demo   install, then run the demo on the embedded SQLite store"
	@echo "make test   install, cargo test, lints, then pytest under both backends"
	@echo "make bench  release build, benchmarks, ratios; ctxengine bench tables and plot in bench-out/"
	@echo "make docs   the user guide (mkdocs-material + mkdocstrings) into site/, strict, offline"
	@echo "make wheel  the wheel for this Python into dist/ (make wheels: every supported Python found; make sdist)"

# PostgreSQL server binaries for the integration suite (the harness starts a
# private server on a temp dir and a free port; nothing listens system-wide).
system-deps:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "postgresql server binaries present"; \
	else \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	fi

# Builds the Rust extension (release profile) and installs the package with
# its test extras, editable so python/ is what runs.
install: system-deps
	$(PIP) install -q --disable-pip-version-check -e '.[test]'

# A wheel for $(PYTHON) in dist/: version-specific (cp311, ...), not abi3, because the binding
# reads CPython internals the limited API does not offer (ADR 0017). Release profile, so after
# `make install` only the binding is compiled again, not the core.
wheel:
	rm -f dist/ctxengine-*.whl
	$(PYTHON) -m maturin build --release --locked --out dist --interpreter $(PYTHON)

# One wheel per supported interpreter (requires-python) that maturin finds on this machine.
wheels:
	$(PYTHON) -m maturin build --release --locked --out dist --find-interpreter

# The source distribution: installs with pip where a Rust toolchain is on PATH.
sdist:
	$(PYTHON) -m maturin sdist --out dist

demo: install
	$(PYTHON) -m ctxengine demo

# MAKEFLAGS cleared: under `make -j2` cargo would try make's jobserver and warn; it runs its own jobs.
cargo-test:
	MAKEFLAGS= cargo test
	cargo fmt --all -- --check
	MAKEFLAGS= cargo clippy --workspace --all-targets -- -D warnings

lint:
	$(PYTHON) -m ruff check python tests benches
	$(PYTHON) -m ruff format --check python tests benches
	$(PYTHON) -m mypy --strict python/ctxengine
	$(PYTHON) -m mypy.stubtest ctxengine._core

# Two workers (pytest-xdist), one per core of the README's machine; work-stealing, because a few
# files (the bench smoke, the process-kill tests) run far longer than the rest.
pytest:
	$(PYTHON) -m pytest -q -n 2 --dist worksteal

# The Rust checks and the Python lints share nothing: run side by side (mypy is one thread,
# and cargo's last crate and link are too), then the suite.
test: install wheel
	$(MAKE) --no-print-directory -j2 cargo-test lint
	$(MAKE) --no-print-directory pytest

# The peers extra (LangChain, matplotlib) lets `ctxengine bench` compare and plot.
bench: system-deps
	$(PIP) install -q --disable-pip-version-check -e '.[test,peers]'
	$(PYTHON) -m pytest benches --benchmark-enable --benchmark-only -q \
		--benchmark-columns=median,mean,stddev,rounds --benchmark-sort=name -p no:randomly \
		--benchmark-json=.bench.json
	$(PYTHON) benches/report.py .bench.json
	$(PYTHON) -m ctxengine bench --out bench-out

# The guide's code blocks run in `make test` (tests/test_docs.py); this builds the site.
# The build fetches nothing (no fonts, no plugins that call out); the NO_MKDOCS_2_WARNING
# variable silences mkdocs-material's end-of-life banner, which is not a build warning.
docs:
	$(PIP) install -q --disable-pip-version-check -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict

clean:
	cargo clean
	rm -rf build dist site .bench.json python/ctxengine/_core*.so
