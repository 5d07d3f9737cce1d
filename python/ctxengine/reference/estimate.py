"""Conservative per-model token estimation with a bounded memo (ADR 0001).

A raw estimate is ``ceil(len(canonical_bytes) / bytes_per_token) + framing``;
it is memoized by ``(model_id, kind, sha256)`` in an LRU that changes time,
never a number. The per-model correction is applied in exact integer
arithmetic, so both backends agree on every input.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import EstimatorError
from .arguments import _has_surrogate, check_model_id, check_values
from .canonical import canonical_json, has_item_cache, item_canonical

SNAPSHOT_VERSION = 1
# Counts are 64-bit in both backends: each count a signed 64-bit int, the
# cumulative reconciled sums unsigned 64-bit. Beyond that is an EstimatorError.
MAX_COUNT = 2**63 - 1
MAX_SUM = 2**64 - 1
_SNAPSHOT_KEYS = frozenset(
    {"version", "bytes_per_token", "framing_tokens", "profiles", "memo_capacity", "corrections"}
)

_MemoKey = tuple[str, str, bytes]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_bytes_per_token(value: object, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise EstimatorError(f"{where}: expected a number, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number) or number <= 0.0:
        raise EstimatorError(f"{where}: must be a positive finite number, got {value!r}")
    return number


def _check_count(value: object, where: str) -> int:
    if not _is_int(value):
        raise EstimatorError(f"{where}: expected an int, got {type(value).__name__}")
    assert isinstance(value, int)
    if value < 0:
        raise EstimatorError(f"{where}: must not be negative, got {value}")
    if value > MAX_COUNT:
        raise EstimatorError(f"{where}: out of range, got {value}")
    return int(value)


def _check_profiles(profiles: object, where: str) -> dict[str, tuple[float, int]]:
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
            _check_bytes_per_token(profile[0], f"{where}[{prefix!r}].bytes_per_token"),
            _check_count(profile[1], f"{where}[{prefix!r}].framing_tokens"),
        )
    return checked


def _canonical_and_kind(value: object) -> tuple[bytes, bytes, str]:
    """``(canonical_bytes, sha256_digest, kind)``; items come from their ``_cj`` cache."""
    if has_item_cache(value):
        data, digest = item_canonical(value)
        return data, digest, type(value).kind  # type: ignore[attr-defined]
    data = canonical_json(value)
    if isinstance(value, str):
        kind = "text"
    else:
        declared = getattr(type(value), "kind", None)
        kind = declared if isinstance(declared, str) and hasattr(value, "to_dict") else "json"
    return data, hashlib.sha256(data).digest(), kind


class TokenEstimator:
    """Per-model token estimates, corrected by reconciled provider counts."""

    __slots__ = (
        "_bytes_per_token",
        "_corrections",
        "_framing_tokens",
        "_hits",
        "_memo",
        "_memo_capacity",
        "_misses",
        "_profile_cache",
        "_profiles",
    )

    def __init__(
        self,
        *,
        bytes_per_token: float = 3.0,
        framing_tokens: int = 4,
        profiles: Mapping[str, tuple[float, int]] | None = None,
        memo_capacity: int = 100_000,
    ) -> None:
        self._bytes_per_token = _check_bytes_per_token(bytes_per_token, "bytes_per_token")
        self._framing_tokens = _check_count(framing_tokens, "framing_tokens")
        self._profiles = _check_profiles(profiles, "profiles")
        self._memo_capacity = _check_count(memo_capacity, "memo_capacity")
        self._memo: OrderedDict[_MemoKey, int] = OrderedDict()
        self._hits = 0
        self._misses = 0
        # model_id -> [estimated, actual], the cumulative reconciled sums
        self._corrections: dict[str, list[int]] = {}
        self._profile_cache: dict[str, tuple[float, int]] = {}

    def __repr__(self) -> str:
        return (
            f"TokenEstimator(bytes_per_token={self._bytes_per_token!r}, "
            f"framing_tokens={self._framing_tokens!r}, profiles={self._profiles!r}, "
            f"memo_capacity={self._memo_capacity!r})"
        )

    # ------------------------------------------------------------------
    # raw estimates

    def _profile(self, model_id: str) -> tuple[float, int]:
        """``(bytes_per_token, framing_tokens)`` of the longest matching prefix."""
        profile = self._profile_cache.get(model_id)
        if profile is None:
            matches = [prefix for prefix in self._profiles if model_id.startswith(prefix)]
            if matches:
                profile = self._profiles[max(matches, key=len)]
            else:
                profile = (self._bytes_per_token, self._framing_tokens)
            self._profile_cache[model_id] = profile
        return profile

    def raw(self, value: object, model_id: str) -> int:
        """The uncorrected estimate of one value."""
        return self._raw(value, check_model_id(model_id))

    def _raw(self, value: object, model_id: str) -> int:
        data, digest, kind = _canonical_and_kind(value)
        key = (model_id, kind, digest)
        memo = self._memo
        cached = memo.get(key)
        if cached is not None:
            self._hits += 1
            memo.move_to_end(key)
            return cached
        self._misses += 1
        bytes_per_token, framing_tokens = self._profile(model_id)
        quotient = len(data) / bytes_per_token
        # Both backends count in signed 64 bits (floats at 4e18 are integers,
        # so this is ceil(quotient) >= 4e18).
        if quotient >= 4.0e18 or math.ceil(quotient) + framing_tokens > MAX_COUNT:
            raise EstimatorError("raw estimate overflows a 64-bit integer")
        estimate = math.ceil(quotient) + framing_tokens
        if self._memo_capacity:
            memo[key] = estimate
            if len(memo) > self._memo_capacity:
                memo.popitem(last=False)
        return estimate

    def raw_estimates(self, items: Iterable[object], model_id: str) -> list[int]:
        """The raw estimate of each item, in order."""
        values = check_values("items", items)
        check_model_id(model_id)
        return [self._raw(item, model_id) for item in values]

    # ------------------------------------------------------------------
    # correction

    def corrected(self, raw_sum: int, model_id: str) -> int:
        """``ceil(raw_sum * A / E)`` in exact integers when ``A > E``, else ``raw_sum``."""
        if not _is_int(raw_sum):
            raise EstimatorError(f"raw_sum: expected an int, got {type(raw_sum).__name__}")
        if not -MAX_COUNT - 1 <= raw_sum <= MAX_COUNT:
            raise EstimatorError(f"raw_sum: out of range, got {raw_sum}")
        return self._corrected(raw_sum, check_model_id(model_id))

    def _corrected(self, raw_sum: int, model_id: str) -> int:
        sums = self._corrections.get(model_id)
        if sums is None:
            return raw_sum
        estimated, actual = sums
        if estimated == 0 or actual <= estimated:
            return raw_sum
        return (raw_sum * actual + estimated - 1) // estimated

    def _sum(self, name: str, items: Iterable[object], model_id: str) -> int:
        values = check_values(name, items)
        check_model_id(model_id)
        total = sum(self._raw(item, model_id) for item in values)
        if total > MAX_COUNT:
            raise EstimatorError("raw estimate sum overflows a 64-bit integer")
        return self._corrected(total, model_id)

    def estimate(self, items: Iterable[object], model_id: str) -> int:
        return self._sum("items", items, model_id)

    def estimate_text(self, text: str, model_id: str) -> int:
        if not isinstance(text, str):
            raise EstimatorError(f"text: expected a str, got {type(text).__name__}")
        check_model_id(model_id)
        return self._corrected(self._raw(text, model_id), model_id)

    def estimate_tools(self, tools: Iterable[object], model_id: str) -> int:
        return self._sum("tools", tools, model_id)

    def reconcile(self, model_id: str, estimated: int, actual: int) -> None:
        """Record a provider's actual count against our estimate (after a model response)."""
        check_model_id(model_id)
        if not _is_int(estimated) or not 0 < estimated <= MAX_COUNT:
            raise EstimatorError(f"estimated: expected a positive int, got {estimated!r}")
        if not _is_int(actual) or not 0 <= actual <= MAX_COUNT:
            raise EstimatorError(f"actual: expected a non-negative int, got {actual!r}")
        sums = self._corrections.get(model_id, [0, 0])
        total_estimated, total_actual = sums[0] + int(estimated), sums[1] + int(actual)
        if total_estimated > MAX_SUM or total_actual > MAX_SUM:
            raise EstimatorError("reconciled sums overflow 64 bits")
        self._corrections[model_id] = [total_estimated, total_actual]

    def correction(self, model_id: str) -> float:
        """The factor applied to raw sums: ``max(1.0, A / E)``."""
        return max(1.0, self.error_ratio(model_id))

    def error_ratio(self, model_id: str) -> float:
        """``A / E`` unclamped; ``1.0`` before any reconcile."""
        sums = self._corrections.get(check_model_id(model_id))
        if sums is None or sums[0] == 0:
            return 1.0
        return sums[1] / sums[0]

    # ------------------------------------------------------------------
    # persistence and introspection

    def snapshot(self) -> dict[str, Any]:
        """Settings and correction sums (not the memo) as plain JSON data."""
        return {
            "version": SNAPSHOT_VERSION,
            "bytes_per_token": self._bytes_per_token,
            "framing_tokens": self._framing_tokens,
            "profiles": {prefix: [bpt, framing] for prefix, (bpt, framing) in self._profiles.items()},
            "memo_capacity": self._memo_capacity,
            "corrections": {model_id: list(sums) for model_id, sums in self._corrections.items()},
        }

    @classmethod
    def restore(cls, snapshot: Mapping[str, Any]) -> TokenEstimator:
        """Rebuild an estimator from ``snapshot()`` output (of either backend)."""
        if not isinstance(snapshot, Mapping):
            raise EstimatorError(f"snapshot: expected a mapping, got {type(snapshot).__name__}")
        missing = sorted(_SNAPSHOT_KEYS - snapshot.keys())
        if missing:
            raise EstimatorError(f"snapshot: missing {', '.join(missing)}")
        unknown = sorted(str(key) for key in snapshot.keys() - _SNAPSHOT_KEYS)
        if unknown:
            raise EstimatorError(f"snapshot: unknown key {', '.join(unknown)}")
        version = snapshot["version"]
        if not _is_int(version) or version != SNAPSHOT_VERSION:
            raise EstimatorError(f"snapshot: unsupported version {version!r}")
        estimator = cls(
            bytes_per_token=_check_bytes_per_token(snapshot["bytes_per_token"], "snapshot.bytes_per_token"),
            framing_tokens=_check_count(snapshot["framing_tokens"], "snapshot.framing_tokens"),
            profiles=_check_profiles(snapshot["profiles"], "snapshot.profiles"),
            memo_capacity=_check_count(snapshot["memo_capacity"], "snapshot.memo_capacity"),
        )
        corrections = snapshot["corrections"]
        if not isinstance(corrections, Mapping):
            raise EstimatorError("snapshot.corrections: expected a mapping")
        for model_id, sums in corrections.items():
            where = f"snapshot.corrections[{model_id!r}]"
            if not isinstance(model_id, str):
                raise EstimatorError(f"{where}: model id is not a string")
            if _has_surrogate(model_id):
                raise EstimatorError(f"{where}: lone surrogate in model id")
            if not isinstance(sums, (list, tuple)) or len(sums) != 2:
                raise EstimatorError(f"{where}: expected [estimated, actual]")
            estimator._corrections[model_id] = [
                _check_count(sums[0], f"{where}.estimated"),
                _check_count(sums[1], f"{where}.actual"),
            ]
        return estimator

    def memo_stats(self) -> dict[str, int]:
        return {
            "hits": self._hits,
            "misses": self._misses,
            "size": len(self._memo),
            "capacity": self._memo_capacity,
        }


__all__ = ["MAX_COUNT", "MAX_SUM", "SNAPSHOT_VERSION", "TokenEstimator"]
