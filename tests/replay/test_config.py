"""Replay configurations parse from TOML and JSON; every bad key is a typed error
(``PolicyError``) naming it by its path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxengine.errors import ArgumentError, ContextError, PolicyError
from ctxengine.replay import ReplayConfig, ReplayOptions, configs_from_dict, load_configs


def test_a_file_of_named_configurations(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[configs.small]\nmodel = "anthropic:claude-x"\nwindow = 16000\noutput_reserve = 1024\n'
        'counting = "estimate"\npolicy = { clearing = { keep_pairs = 1, exclude_tools = ["read"] } }\n'
        "[configs.small.compaction]\nmax_depth = 4\n[configs.big]\nwindow = 200000\n"
    )
    small, big = load_configs(path)
    assert (small.name, small.model.model_id, small.model.context_window) == (
        "small",
        "anthropic:claude-x",
        16000,
    )
    assert small.model.default_output_reserve == 1024 and small.counting == "estimate"
    assert small.policy.clearing_keep_pairs == 1 and small.policy.clearing_exclude_tools == ("read",)
    assert small.compaction.max_depth == 4 and big.compaction.max_depth == 2
    as_json = tmp_path / "c.json"
    table = {k: v for k, v in small.to_dict().items() if k != "name"}
    as_json.write_text(json.dumps({"configs": {"small": table}}))
    assert load_configs(as_json) == [small]


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"configs": {"a": {"windw": 1}}}, "configs.a.windw"),
        ({"configs": {"a": {"window": 0}}}, "configs.a.window"),
        ({"configs": {"a": {"window": "32k"}}}, "configs.a.window"),
        ({"configs": {"a": {"model": "gpt-4o"}}}, "configs.a.model"),
        ({"configs": {"a": {"counting": "exactly"}}}, "configs.a.counting"),
        ({"configs": {"a": {"max_output": 100, "output_reserve": 200}}}, "configs.a.output_reserve"),
        ({"configs": {"a": {"policy": {"history": {"floor": 1}}}}}, "configs.a.policy.history.floor"),
        (
            {"configs": {"a": {"policy": {"clearing": {"keep_pairs": -1}}}}},
            "configs.a.policy.clearing.keep_pairs",
        ),
        ({"configs": {"a": {"compaction": {"enabled": "yes"}}}}, "configs.a.compaction.enabled"),
        ({"configs": {"a": {"compaction": {"depth": 3}}}}, "configs.a.compaction.depth"),
        ({"configs": {"a": []}}, "configs.a"),
        ({"configs": {}}, "configs"),
        ({"config": {}}, "config"),
    ],
)
def test_bad_keys_are_named(data: dict[str, Any], key: str) -> None:
    with pytest.raises(PolicyError) as err:
        configs_from_dict(data)
    assert err.value.key == key
    assert isinstance(err.value, ContextError)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read"):
        load_configs(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("[configs.a\n")
    with pytest.raises(PolicyError, match="not valid TOML"):
        load_configs(tmp_path / "bad.toml")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(PolicyError, match="not valid JSON"):
        load_configs(tmp_path / "bad.json")


def test_names_are_unique_and_not_a_baselines() -> None:
    with pytest.raises(PolicyError) as err:
        ReplayOptions([ReplayConfig("a"), ReplayConfig("a")])
    assert err.value.key == "configs.a"
    with pytest.raises(PolicyError, match="baseline"):
        ReplayOptions([ReplayConfig("full_history")])
    with pytest.raises(ArgumentError, match="method"):
        ReplayOptions([ReplayConfig("a")], method="slow")
    with pytest.raises(ArgumentError, match="configs"):
        ReplayOptions([])


def test_a_window_the_policy_cannot_allocate_names_the_configuration(tmp_path: Path) -> None:
    import asyncio

    from ctxengine.replay import replay_transcripts

    path = tmp_path / "t.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n')
    (small,) = configs_from_dict({"configs": {"tiny": {"window": 9000}}})
    with pytest.raises(PolicyError) as err:
        asyncio.run(replay_transcripts([path], ReplayOptions([small])))
    assert err.value.key == "configs.tiny" and "floor" in err.value.reason
