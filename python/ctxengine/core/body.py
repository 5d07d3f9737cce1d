"""Region B's fit on the active backend (ADR 0001, issue 12).

The contract's values (``BodyInputs``, ``BodyLimits``, ``BodyBlock`` ->
``BodyFit``, and ``RenderLine``) are in ``ctxengine.model.body``; they are re-exported here.
"""

from __future__ import annotations

from typing import Any

from ..model.body import BLOCK_KINDS, BodyBlock, BodyFit, BodyInputs, BodyLimits, RenderLine
from . import backends


def fit_body(*, inputs: BodyInputs, limits: BodyLimits, estimator: Any, model_id: str) -> BodyFit:
    """The fit on the backend whose estimator this is (the reference for any other estimator)."""
    module = backends.active()
    if not isinstance(estimator, module.TokenEstimator):
        module = backends.module("python")
    fit: BodyFit = module.fit_body(inputs=inputs, limits=limits, estimator=estimator, model_id=model_id)
    return fit


__all__ = ["BLOCK_KINDS", "BodyBlock", "BodyFit", "BodyInputs", "BodyLimits", "RenderLine", "fit_body"]
