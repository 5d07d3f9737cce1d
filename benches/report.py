"""Print SPEC section 11 ratios from a pytest-benchmark JSON file.

Usage: python benches/report.py .bench.json
"""

from __future__ import annotations

import json
import sys


def _medians(path: str) -> dict[str, float]:
    with open(path) as fh:
        data = json.load(fh)
    return {b["name"]: b["stats"]["median"] for b in data["benchmarks"]}


def _bytes(path: str) -> dict[str, int]:
    with open(path) as fh:
        data = json.load(fh)
    return {
        b["name"]: int(b["extra_info"]["bytes"]) for b in data["benchmarks"] if "bytes" in b["extra_info"]
    }


def _row(what: str, value: float, target: str, ok: bool) -> str:
    return f"| {what} | {value:,.3f} | {target} | {'met' if ok else 'MISSED'} |"


def main(path: str) -> int:
    m = _medians(path)
    rows = ["| what | measured | target | |", "|---|---:|---|---|"]

    def get(name: str) -> float | None:
        return m.get(name)

    hash_rust = get("bench_payload_hash_1mb[rust]")
    hash_py = get("bench_payload_hash_1mb[python]")
    sha = get("bench_sha256_of_canonical_bytes_1mb")
    if hash_rust and hash_py and sha:
        rows.append(_row("payload_hash 1 MB, rust median ms", hash_rust * 1e3, "-", True))
        rows.append(
            _row(
                "payload_hash 1 MB, reference / rust",
                hash_py / hash_rust,
                ">= 20x",
                hash_py / hash_rust >= 20,
            )
        )
        rows.append(
            _row("payload_hash 1 MB, rust / hashlib.sha256", hash_rust / sha, "<= 3x", hash_rust / sha <= 3)
        )
    warm_rust = get("bench_select_history_warm_10k[rust]")
    warm_py = get("bench_select_history_warm_10k[python]")
    if warm_rust and warm_py:
        rows.append(
            _row("select_history 10k warm, rust median ms", warm_rust * 1e3, "<= 1 ms", warm_rust <= 1e-3)
        )
        rows.append(
            _row(
                "select_history 10k warm, reference / rust",
                warm_py / warm_rust,
                ">= 50x",
                warm_py / warm_rust >= 50,
            )
        )
    cold_rust = get("bench_select_history_cold_10k[rust]")
    if cold_rust:
        rows.append(
            _row("select_history 10k cold, rust median ms", cold_rust * 1e3, "<= 15 ms", cold_rust <= 15e-3)
        )
    sizes = _bytes(path)
    for name, value in sorted(m.items()):
        if name.startswith("bench_count_tokens_1mb[") and name in sizes:
            # one core: the count runs on the calling thread
            rows.append(_row(f"tokenizer {name[23:-1]}, MB/s per core", sizes[name] / value / 1e6, "-", True))
    for name, value in sorted(m.items()):
        if name.startswith("bench_") and "store" in name:
            rows.append(_row(f"{name} median ms", value * 1e3, "-", True))
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".bench.json"))
