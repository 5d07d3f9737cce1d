"""The prompt-cache workloads (issue 39), one small round: the long run and the session of
``ctxengine bench --cache --quick`` through the loop, both wires, and the ``trim_messages``
baseline when LangChain is installed. The full workloads: ``ctxengine bench --cache``."""

from __future__ import annotations

from typing import Any

from ctxengine.cli.bench_cache import CacheResults, CacheSettings, run_cache


def bench_prompt_cache_workloads_one_small_round(benchmark: Any, backend_name: str) -> None:
    results: CacheResults = benchmark.pedantic(run_cache, args=(CacheSettings.for_run(True),), rounds=1)
    data = results.to_dict()
    for name, w in data["workloads"].items():
        assert w["built"] + w["context_overflow"] == w["request_points"] > 0, name
        ours = w["sides"]["ctxengine/openai_chat"]
        benchmark.extra_info[f"{name} built"] = f"{w['built']} of {w['request_points']}"
        benchmark.extra_info[f"{name} openai cached"] = ours["cached_fraction"]["openai"]
        benchmark.extra_info[f"{name} ceiling"] = ours["cached_fraction"]["ceiling"]
    assert data["workloads"]["session"]["built"] == data["workloads"]["session"]["request_points"]
