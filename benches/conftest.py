"""Benchmarks run as smoke tests in `make test` (--benchmark-disable) and for real in `make bench`."""
