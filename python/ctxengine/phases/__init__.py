"""Phase projections for controller-gated protocols (ADR-0003, SPEC section 8).

A controller owns the canonical state of each protocol instance (request,
sources, constraints, versioned Prompt Pseudocode and Response Plan
artifacts) as ``phase.*`` events, and compiles one stateless context per
operation from positive inclusion contracts: never the conversation with a
request to ignore parts of it.

::

    ctl = ProtocolController(store)
    state = await ctl.submit("task-1", "Summarize the report", sources=[Source("report", text)])
    projection = ctl.project(state, "draft_prompt")   # send projection.request; record the reply:
    state = await ctl.record_artifact("task-1", "prompt", reply, projection_sha256=projection.sha256)
    state = await ctl.confirm("task-1", "prompt", version=state.prompt.version, digest=state.prompt.digest)
"""

from __future__ import annotations

from .commands import PHASE_EVENT_TYPES, PHASE_EVENT_TYPES_V1, PHASE_EVENT_TYPES_V2, payload_format
from .compiler import (
    OUTPUT_MODE_TEXT,
    PHASE_FRAMING,
    PHASE_FRAMING_V2,
    Projection,
    ProjectionCompiler,
    symbols_of,
)
from .contracts import (
    CONTRACTS,
    OPERATIONS,
    STAGE_OPERATIONS,
    SYMBOLS,
    OperationContract,
    available_symbols,
    check_symbols,
)
from .controller import ProtocolController
from .packs import DEFAULT_PACKS, Clause, InstructionPack
from .state import (
    ACTIVE_STAGES,
    ARTIFACT_STATUSES,
    OUTPUT_MODES,
    PROTOCOL_VERSION,
    PROTOCOL_VERSIONS,
    STAGES,
    TERMINAL_STAGES,
    VERDICTS,
    Artifact,
    ArtifactRef,
    Feedback,
    InputRequest,
    PhaseRecord,
    ProtocolState,
    Result,
    Source,
    Termination,
    body_digest,
)

__all__ = [
    "ACTIVE_STAGES",
    "ARTIFACT_STATUSES",
    "CONTRACTS",
    "DEFAULT_PACKS",
    "OPERATIONS",
    "OUTPUT_MODES",
    "OUTPUT_MODE_TEXT",
    "PHASE_EVENT_TYPES",
    "PHASE_EVENT_TYPES_V1",
    "PHASE_EVENT_TYPES_V2",
    "PHASE_FRAMING",
    "PHASE_FRAMING_V2",
    "PROTOCOL_VERSION",
    "PROTOCOL_VERSIONS",
    "STAGES",
    "STAGE_OPERATIONS",
    "SYMBOLS",
    "TERMINAL_STAGES",
    "VERDICTS",
    "Artifact",
    "ArtifactRef",
    "Clause",
    "Feedback",
    "InputRequest",
    "InstructionPack",
    "OperationContract",
    "PhaseRecord",
    "Projection",
    "ProjectionCompiler",
    "ProtocolController",
    "ProtocolState",
    "Result",
    "Source",
    "Termination",
    "available_symbols",
    "body_digest",
    "check_symbols",
    "payload_format",
    "symbols_of",
]
