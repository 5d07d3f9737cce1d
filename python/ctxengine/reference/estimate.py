"""Per-model token counts with a bounded memo (ADR 0001, ADR 0012).

A model id is counted by a method: exactly with a public encoding
(``o200k_base``, ``cl100k_base``; ``tokenize``) or with the byte heuristic
``ceil(len(canonical_bytes) / bytes_per_token) + framing``. A table of model-id
prefixes picks the method; a model id ending in ``#<method>`` (a plan's counting
key, ``openai:gpt-4o#o200k_base``) forces one. Raw counts are memoized by
``(counter, kind, sha256)`` — the counter is the model id for the heuristic and
the encoding for exact counts — in an LRU that changes time, never a number.
Reconciled provider counts calibrate each model (``calibrate``) in exact integer
arithmetic, so both backends agree on every input.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import EstimatorError
from . import calibrate, snapshot, tokenize
from .arguments import _has_surrogate, check_model_id, check_values
from .canonical import canonical_json, format_float, has_item_cache, item_canonical
from .snapshot import MAX_COUNT, MAX_SUM, SNAPSHOT_VERSION, Settings, is_int

_MemoKey = tuple[str, str, bytes]


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


def split_key(key: str) -> tuple[str, str | None]:
    """``(model_id, method)`` of ``model#method``; ``(key, None)`` when no known method ends it."""
    model, sep, method = key.rpartition("#")
    if sep and method in tokenize.METHODS:
        return model, method
    return key, None


class _Counter:
    """How one key counts: resolved once per estimator and key."""

    __slots__ = ("calibration", "encoding", "memo", "method", "profile")

    def __init__(self, model: str, method: str, profile: tuple[float, int]) -> None:
        self.method = method
        self.encoding = None if method == tokenize.HEURISTIC else method
        self.profile = profile
        # The heuristic keeps today's keys (the model id); an exact method memoizes per
        # encoding (every model on it shares an entry) and calibrates per model and method.
        self.memo = model if self.encoding is None else f"#{self.encoding}"
        self.calibration = model if self.encoding is None else f"{model}#{self.encoding}"

    def stored_id(self, kind: str) -> str:
        """The id a raw count of ``kind`` is stored under: equal ids mean equal counts of
        equal canonical bytes (``heuristic:BYTES_PER_TOKEN:FRAMING|kind`` for the heuristic,
        ``ENCODING:RECIPE_VERSION|kind`` for an exact method; no id of one method is another's)."""
        if self.encoding is None:
            bytes_per_token, framing_tokens = self.profile
            return f"heuristic:{format_float(bytes_per_token)}:{framing_tokens}|{kind}"
        return f"{self.encoding}:{tokenize.RECIPE_VERSION}|{kind}"


def _check_kind(kind: object) -> str:
    if not isinstance(kind, str):
        raise EstimatorError(f"kind: expected a str, got {type(kind).__name__}")
    if _has_surrogate(kind):
        raise EstimatorError("kind: lone surrogate in string")
    return kind


class TokenEstimator:
    """Per-model token counts, calibrated by reconciled provider counts."""

    __slots__ = (
        "_counters",
        "_factors",
        "_hits",
        "_memo",
        "_misses",
        "_profile_cache",
        "_s",
    )

    def __init__(
        self,
        *,
        bytes_per_token: float = 3.0,
        framing_tokens: int = 4,
        profiles: Mapping[str, tuple[float, int]] | None = None,
        memo_capacity: int = 100_000,
        encodings: Mapping[str, str] | None = None,
    ) -> None:
        self._s = Settings(
            bytes_per_token=snapshot.check_bytes_per_token(bytes_per_token, "bytes_per_token"),
            framing_tokens=snapshot.check_count(framing_tokens, "framing_tokens"),
            profiles=snapshot.check_profiles(profiles, "profiles"),
            memo_capacity=snapshot.check_count(memo_capacity, "memo_capacity"),
            encodings=tokenize.check_table(encodings, "encodings"),
        )
        self._memo: OrderedDict[_MemoKey, int] = OrderedDict()
        self._hits = 0
        self._misses = 0
        self._profile_cache: dict[str, tuple[float, int]] = {}
        self._counters: dict[str, _Counter] = {}
        # calibration key -> (num, den), dropped on reconcile
        self._factors: dict[str, calibrate.Ratio] = {}

    def __repr__(self) -> str:
        s = self._s
        return (
            f"TokenEstimator(bytes_per_token={s.bytes_per_token!r}, "
            f"framing_tokens={s.framing_tokens!r}, profiles={s.profiles!r}, "
            f"memo_capacity={s.memo_capacity!r}, encodings={s.encodings!r})"
        )

    # ------------------------------------------------------------------
    # counting methods

    def _profile(self, model_id: str) -> tuple[float, int]:
        """``(bytes_per_token, framing_tokens)`` of the longest matching prefix."""
        profile = self._profile_cache.get(model_id)
        if profile is None:
            profiles = self._s.profiles
            matches = [prefix for prefix in profiles if model_id.startswith(prefix)]
            if matches:
                profile = profiles[max(matches, key=len)]
            else:
                profile = (self._s.bytes_per_token, self._s.framing_tokens)
            self._profile_cache[model_id] = profile
        return profile

    def _counter(self, key: str) -> _Counter:
        counter = self._counters.get(key)
        if counter is None:
            model, method = split_key(key)
            if method is None:
                method = tokenize.resolve(model, self._s.encodings)
            counter = self._counters[key] = _Counter(model, method, self._profile(model))
        return counter

    def counting_method(self, model_id: str) -> str:
        """``"heuristic"`` or the encoding that counts ``model_id`` (a ``#method`` suffix wins)."""
        return self._counter(check_model_id(model_id)).method

    # ------------------------------------------------------------------
    # raw counts

    def raw(self, value: object, model_id: str) -> int:
        """The uncorrected count of one value."""
        return self._raw(value, self._counter(check_model_id(model_id)))

    def _raw(self, value: object, counter: _Counter) -> int:
        data, digest, kind = _canonical_and_kind(value)
        key = (counter.memo, kind, digest)
        memo = self._memo
        cached = memo.get(key)
        if cached is not None:
            self._hits += 1
            memo.move_to_end(key)
            return cached
        self._misses += 1
        if counter.encoding is not None:
            estimate = tokenize.raw_count(counter.encoding, kind, data)
        else:
            bytes_per_token, framing_tokens = counter.profile
            quotient = len(data) / bytes_per_token
            # Both backends count in signed 64 bits (floats at 4e18 are integers,
            # so this is ceil(quotient) >= 4e18).
            if quotient >= 4.0e18 or math.ceil(quotient) + framing_tokens > MAX_COUNT:
                raise EstimatorError("raw estimate overflows a 64-bit integer")
            estimate = math.ceil(quotient) + framing_tokens
        if self._s.memo_capacity:
            memo[key] = estimate
            if len(memo) > self._s.memo_capacity:
                memo.popitem(last=False)
        return estimate

    def raw_estimates(self, items: Iterable[object], model_id: str) -> list[int]:
        """The raw count of each item, in order."""
        values = check_values("items", items)
        counter = self._counter(check_model_id(model_id))
        return [self._raw(item, counter) for item in values]

    # ------------------------------------------------------------------
    # stored counts (ADR 0011)

    def counter_id(self, model_id: str, kind: str) -> str:
        """Names how this estimator counts ``kind`` for ``model_id`` (a key, ``model#method``
        or a bare model id): counts stored under the same id are the counts it would compute
        (``_Counter.stored_id``; no id of one counting method is another's)."""
        counter = self._counter(check_model_id(model_id))
        return counter.stored_id(_check_kind(kind))

    def prime(self, model_id: str, kind: str, digests: Iterable[bytes], raws: Iterable[int]) -> None:
        """Seed the memo with raw counts read from the store: ``(key, kind, digest) -> raw``.

        An entry already memoized is left as it is; priming counts as neither a
        hit nor a miss. The counts must be what ``raw`` would compute (the
        caller reads them under this estimator's ``counter_id``).
        """
        counter = self._counter(check_model_id(model_id))
        _check_kind(kind)
        digests, raws = list(digests), list(raws)
        if len(digests) != len(raws):
            raise EstimatorError(f"prime: {len(digests)} digests for {len(raws)} counts")
        checked = []
        for i, (digest, raw) in enumerate(zip(digests, raws, strict=True)):
            if not isinstance(digest, bytes) or len(digest) != 32:
                raise EstimatorError(f"prime: digests[{i}] is not a 32-byte SHA-256 digest")
            checked.append((digest, snapshot.check_count(raw, f"prime: raws[{i}]")))
        if not self._s.memo_capacity:
            return
        memo = self._memo
        for digest, raw in checked:
            key = (counter.memo, kind, digest)
            if key not in memo:
                memo[key] = raw
                if len(memo) > self._s.memo_capacity:
                    memo.popitem(last=False)

    # ------------------------------------------------------------------
    # calibration

    def _factor(self, counter: _Counter) -> calibrate.Ratio:
        key = counter.calibration
        ratio = self._factors.get(key)
        if ratio is None:
            estimated, actual = self._s.corrections.get(key, (0, 0))
            window = self._s.samples.get(key, [])
            ratio = calibrate.factor(estimated, actual, window, counter.encoding is None)
            self._factors[key] = ratio
        return ratio

    def corrected(self, raw_sum: int, model_id: str) -> int:
        """``ceil(raw_sum * factor)`` in exact integers (``calibrate.factor``)."""
        if not is_int(raw_sum):
            raise EstimatorError(f"raw_sum: expected an int, got {type(raw_sum).__name__}")
        if not -MAX_COUNT - 1 <= raw_sum <= MAX_COUNT:
            raise EstimatorError(f"raw_sum: out of range, got {raw_sum}")
        return calibrate.apply(raw_sum, self._factor(self._counter(check_model_id(model_id))))

    def _sum(self, name: str, items: Iterable[object], model_id: str) -> int:
        values = check_values(name, items)
        counter = self._counter(check_model_id(model_id))
        total = sum(self._raw(item, counter) for item in values)
        if total > MAX_COUNT:
            raise EstimatorError("raw estimate sum overflows a 64-bit integer")
        return calibrate.apply(total, self._factor(counter))

    def estimate(self, items: Iterable[object], model_id: str) -> int:
        return self._sum("items", items, model_id)

    def estimate_text(self, text: str, model_id: str) -> int:
        if not isinstance(text, str):
            raise EstimatorError(f"text: expected a str, got {type(text).__name__}")
        counter = self._counter(check_model_id(model_id))
        return calibrate.apply(self._raw(text, counter), self._factor(counter))

    def estimate_tools(self, tools: Iterable[object], model_id: str) -> int:
        return self._sum("tools", tools, model_id)

    def reconcile(self, model_id: str, estimated: int, actual: int) -> None:
        """Record a provider's actual count against our estimate (after a model response)."""
        counter = self._counter(check_model_id(model_id))
        if not is_int(estimated) or not 0 < estimated <= MAX_COUNT:
            raise EstimatorError(f"estimated: expected a positive int, got {estimated!r}")
        if not is_int(actual) or not 0 <= actual <= MAX_COUNT:
            raise EstimatorError(f"actual: expected a non-negative int, got {actual!r}")
        key = counter.calibration
        sums = self._s.corrections.get(key, [0, 0])
        total_estimated, total_actual = sums[0] + int(estimated), sums[1] + int(actual)
        if total_estimated > MAX_SUM or total_actual > MAX_SUM:
            raise EstimatorError("reconciled sums overflow 64 bits")
        in_force = self._factor(counter)
        self._s.corrections[key] = [total_estimated, total_actual]
        if counter.encoding is None:
            calibrate.push(self._s.samples.setdefault(key, []), int(estimated), int(actual), in_force)
        self._factors.pop(key, None)

    def correction(self, model_id: str) -> float:
        """The factor applied to raw sums (``calibrate.factor``); 1.0 before any reconcile."""
        num, den = self._factor(self._counter(check_model_id(model_id)))
        return num / den

    def error_ratio(self, model_id: str) -> float:
        """``A / E`` over every reconcile, unclamped; ``1.0`` before any reconcile."""
        counter = self._counter(check_model_id(model_id))
        sums = self._s.corrections.get(counter.calibration)
        if sums is None or sums[0] == 0:
            return 1.0
        return sums[1] / sums[0]

    # ------------------------------------------------------------------
    # persistence and introspection

    def snapshot(self, max_version: int = SNAPSHOT_VERSION) -> dict[str, Any]:
        """Settings and calibration (not the memo) as plain JSON data: version 1 when it
        holds everything, else version 2 (ADR 0012); ``max_version=1`` for readers that
        know only version 1 (the table and the samples are left out)."""
        return snapshot.write(self._s, max_version)

    @classmethod
    def restore(cls, data: Mapping[str, Any]) -> TokenEstimator:
        """Rebuild an estimator from ``snapshot()`` output of any version (either backend's)."""
        s = snapshot.read(data)
        estimator = cls(
            bytes_per_token=s.bytes_per_token,
            framing_tokens=s.framing_tokens,
            profiles=s.profiles,
            memo_capacity=s.memo_capacity,
            encodings=s.encodings,
        )
        estimator._s = s
        return estimator

    def memo_stats(self) -> dict[str, int]:
        return {
            "hits": self._hits,
            "misses": self._misses,
            "size": len(self._memo),
            "capacity": self._s.memo_capacity,
        }


__all__ = ["MAX_COUNT", "MAX_SUM", "SNAPSHOT_VERSION", "TokenEstimator", "split_key"]
