"""Phase projections for controller-gated protocols (ADR-0003, SPEC section 8).

A controller owns the canonical state of each protocol instance (request,
sources, constraints, versioned Prompt Pseudocode and Response Plan
artifacts) as ``phase.*`` events, and compiles one stateless context per
operation from positive inclusion contracts: never the conversation with a
request to ignore parts of it.

::

    ctl = ProtocolController(store)
    state = await ctl.submit("task-1", "Summarize the report", sources=[Source("report", text)])
    request = ctl.project(state, "draft_prompt").request   # send it; record the reply:
    state = await ctl.record_artifact("task-1", "prompt", reply)
    state = await ctl.confirm("task-1", "prompt", version=state.prompt.version, digest=state.prompt.digest)
"""

from __future__ import annotations

from .compiler import OUTPUT_MODE_TEXT, PHASE_FRAMING, Projection, ProjectionCompiler, symbols_of
from .contracts import (
    CONTRACTS,
    OPERATIONS,
    SYMBOLS,
    OperationContract,
    available_symbols,
    check_symbols,
)
from .controller import ProtocolController
from .packs import DEFAULT_PACKS, Clause, InstructionPack
from .state import (
    ARTIFACT_STATUSES,
    OUTPUT_MODES,
    STAGES,
    Artifact,
    ArtifactRef,
    Feedback,
    PhaseRecord,
    ProtocolState,
    Source,
    body_digest,
)
from .transitions import PHASE_EVENT_TYPES

__all__ = [
    "ARTIFACT_STATUSES",
    "CONTRACTS",
    "DEFAULT_PACKS",
    "OPERATIONS",
    "OUTPUT_MODES",
    "OUTPUT_MODE_TEXT",
    "PHASE_EVENT_TYPES",
    "PHASE_FRAMING",
    "STAGES",
    "SYMBOLS",
    "Artifact",
    "ArtifactRef",
    "Clause",
    "Feedback",
    "InstructionPack",
    "OperationContract",
    "PhaseRecord",
    "Projection",
    "ProjectionCompiler",
    "ProtocolController",
    "ProtocolState",
    "Source",
    "available_symbols",
    "body_digest",
    "check_symbols",
    "symbols_of",
]
