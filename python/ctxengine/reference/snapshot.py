"""The estimator's settings and the snapshot formats it is persisted in (ADR 0001,
ADR 0012): version 1 (settings and the reconciled sums) and version 2 (adds the
caller's counting table and the calibration samples). A reader accepts both."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import EstimatorError
from . import calibrate
from .arguments import _has_surrogate
from .tokenize import check_table

# Counts are 64-bit in both backends: each count a signed 64-bit int, the
# cumulative reconciled sums unsigned 64-bit. Beyond that is an EstimatorError.
MAX_COUNT = 2**63 - 1
MAX_SUM = 2**64 - 1
SNAPSHOT_VERSION = 2
_V1_KEYS = frozenset(
    {"version", "bytes_per_token", "framing_tokens", "profiles", "memo_capacity", "corrections"}
)
_V2_KEYS = _V1_KEYS | {"encodings", "samples"}
_KEYS = {1: _V1_KEYS, 2: _V2_KEYS}


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_bytes_per_token(value: object, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise EstimatorError(f"{where}: expected a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:  # an int past the float range
        number = math.inf
    if not math.isfinite(number) or number <= 0.0:
        raise EstimatorError(f"{where}: must be a positive finite number, got {value!r}")
    return number


def check_count(value: object, where: str, limit: int = MAX_COUNT) -> int:
    if not is_int(value):
        raise EstimatorError(f"{where}: expected an int, got {type(value).__name__}")
    assert isinstance(value, int)
    if value < 0:
        raise EstimatorError(f"{where}: must not be negative, got {value}")
    if value > limit:
        raise EstimatorError(f"{where}: out of range, got {value}")
    return int(value)


def check_profiles(profiles: object, where: str) -> dict[str, tuple[float, int]]:
    if profiles is None:
        return {}
    if not isinstance(profiles, Mapping):
        raise EstimatorError(f"{where}: expected a mapping, got {type(profiles).__name__}")
    checked: dict[str, tuple[float, int]] = {}
    for prefix, profile in profiles.items():
        if not isinstance(prefix, str):
            raise EstimatorError(f"{where}: prefix {prefix!r} is not a string")
        if _has_surrogate(str(prefix)):
            raise EstimatorError(f"{where}: lone surrogate in prefix {prefix!r}")
        if not isinstance(profile, (list, tuple)) or len(profile) != 2:
            raise EstimatorError(f"{where}[{prefix!r}]: expected (bytes_per_token, framing_tokens)")
        checked[str(prefix)] = (
            check_bytes_per_token(profile[0], f"{where}[{prefix!r}].bytes_per_token"),
            check_count(profile[1], f"{where}[{prefix!r}].framing_tokens"),
        )
    return checked


@dataclass(slots=True)
class Settings:
    """Everything a snapshot holds: the constructor's arguments and the calibration."""

    bytes_per_token: float = 3.0
    framing_tokens: int = 4
    profiles: dict[str, tuple[float, int]] = field(default_factory=dict)
    memo_capacity: int = 100_000
    encodings: dict[str, str] = field(default_factory=dict)
    # calibration key -> [estimated, actual], in first-reconcile order
    corrections: dict[str, list[int]] = field(default_factory=dict)
    # calibration key -> the window of (estimated, actual) samples, oldest first
    samples: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


def write(s: Settings, max_version: object = SNAPSHOT_VERSION) -> dict[str, Any]:
    """The lowest version that holds ``s``: version 1 when there is nothing of version 2's.

    ``max_version=1`` writes version 1 whatever the state (for readers that know only
    it, ADR 0009): the table and the samples are left out, the sums kept."""
    if not is_int(max_version) or max_version not in _KEYS:
        raise EstimatorError(f"max_version: expected 1 or 2, got {max_version!r}")
    out: dict[str, Any] = {
        "version": 1,
        "bytes_per_token": s.bytes_per_token,
        "framing_tokens": s.framing_tokens,
        "profiles": {prefix: [bpt, framing] for prefix, (bpt, framing) in s.profiles.items()},
        "memo_capacity": s.memo_capacity,
        "corrections": {key: list(sums) for key, sums in s.corrections.items()},
    }
    samples = {key: [list(pair) for pair in window] for key, window in s.samples.items() if window}
    needs_v2 = s.encodings or samples or any("#" in key for key in s.corrections)
    if needs_v2 and max_version == 2:
        out.update(version=2, encodings=dict(s.encodings), samples=samples)
    return out


def read(snapshot: object) -> Settings:
    """Check and decode a snapshot of any version ever written."""
    if not isinstance(snapshot, Mapping):
        raise EstimatorError(f"snapshot: expected a mapping, got {type(snapshot).__name__}")
    version = snapshot.get("version")
    if is_int(version) and version not in _KEYS:
        raise EstimatorError(f"snapshot: unsupported version {version!r}")
    # The keys of the version it says it is (version 1's for anything else).
    keys = _V2_KEYS if is_int(version) and version == 2 else _V1_KEYS
    missing = sorted(keys - snapshot.keys())
    if missing:
        raise EstimatorError(f"snapshot: missing {', '.join(missing)}")
    unknown = sorted(str(key) for key in snapshot.keys() - keys)
    if unknown:
        raise EstimatorError(f"snapshot: unknown key {', '.join(unknown)}")
    if not is_int(version) or version not in _KEYS:
        raise EstimatorError(f"snapshot: unsupported version {version!r}")
    assert isinstance(version, int)
    s = Settings(
        bytes_per_token=check_bytes_per_token(snapshot["bytes_per_token"], "snapshot.bytes_per_token"),
        framing_tokens=check_count(snapshot["framing_tokens"], "snapshot.framing_tokens"),
        profiles=check_profiles(snapshot["profiles"], "snapshot.profiles"),
        memo_capacity=check_count(snapshot["memo_capacity"], "snapshot.memo_capacity"),
    )
    corrections = snapshot["corrections"]
    if not isinstance(corrections, Mapping):
        raise EstimatorError("snapshot.corrections: expected a mapping")
    for key, sums in corrections.items():
        where = f"snapshot.corrections[{key!r}]"
        _check_key(key, where)
        if not isinstance(sums, (list, tuple)) or len(sums) != 2:
            raise EstimatorError(f"{where}: expected [estimated, actual]")
        s.corrections[key] = [
            check_count(sums[0], f"{where}.estimated"),
            check_count(sums[1], f"{where}.actual"),
        ]
    if version >= 2:
        s.encodings = check_table(snapshot["encodings"], "snapshot.encodings")
        s.samples = _read_samples(snapshot["samples"], s.corrections)
    return s


def _check_key(key: object, where: str) -> None:
    if not isinstance(key, str):
        raise EstimatorError(f"{where}: model id is not a string")
    if _has_surrogate(key):
        raise EstimatorError(f"{where}: lone surrogate in model id")


def _read_samples(samples: object, corrections: Mapping[str, list[int]]) -> dict[str, list[tuple[int, int]]]:
    if not isinstance(samples, Mapping):
        raise EstimatorError("snapshot.samples: expected a mapping")
    out: dict[str, list[tuple[int, int]]] = {}
    for key, window in samples.items():
        where = f"snapshot.samples[{key!r}]"
        _check_key(key, where)
        if key not in corrections:
            raise EstimatorError(f"{where}: no reconciled sums for this model")
        if not isinstance(window, (list, tuple)) or len(window) > calibrate.WINDOW:
            raise EstimatorError(f"{where}: expected at most {calibrate.WINDOW} [estimated, actual] pairs")
        pairs: list[tuple[int, int]] = []
        for i, pair in enumerate(window):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise EstimatorError(f"{where}[{i}]: expected [estimated, actual]")
            estimated = check_count(pair[0], f"{where}[{i}].estimated", calibrate.STORED_MAX)
            actual = check_count(pair[1], f"{where}[{i}].actual", calibrate.SAMPLE_MAX)
            if estimated == 0:
                raise EstimatorError(f"{where}[{i}].estimated: must be positive, got 0")
            pairs.append((estimated, actual))
        out[key] = pairs
    return out


__all__ = [
    "MAX_COUNT",
    "MAX_SUM",
    "SNAPSHOT_VERSION",
    "Settings",
    "check_bytes_per_token",
    "check_count",
    "check_profiles",
    "is_int",
    "read",
    "write",
]
