"""The projection compiler: one stateless ``ModelRequest`` per operation, from the state alone.

Layout (same prefix/body machinery as assembly):

* prefix (Region A): the phase framing, the operation id and its task, and
  the instruction packs the operation selects. Nothing in it depends on the
  instance, so each operation's prefix is byte-identical across instances
  and caches at the provider.
* body (Region B), in ``regions.REGION_TABLE`` order: the higher-priority
  constraints, then the per-instance data the contract admits, rendered by
  ``blocks`` (which says what is enveloped and why).

The instance's ``protocol_version`` selects the framing, the clauses
(``Clause.since``) and whether unconfirmed drafts are enveloped, so a
version-1 instance compiles to the bytes it always did (adr 0004).

Each operation's blocks come from its own builder below; ``check_symbols``
then holds the result to the operation's contract. Only the pending feedback
and the current versions are ever read: rejected or superseded versions and
earlier feedback stay in the state for audit and cannot reach a projection.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

from ..assembly.regions import order_of, region_of
from ..assembly.request import ModelRequest, RenderedItem, items_sha256
from ..core.canonical import payload_hash
from ..core.estimator import Estimator, TokenEstimator
from ..errors import ModelValidationError, ProjectionContractError, ProtocolStateError
from . import blocks as b
from .blocks import FRAMINGS, OUTPUT_MODE_TEXT, PHASE_FRAMING, PHASE_FRAMING_V2, Block
from .contracts import (
    CONTRACTS,
    TOOLS_SYMBOL,
    OperationContract,
    available_symbols,
    check_symbols,
    symbol_of,
)
from .packs import PACK_SYMBOLS, Clause, InstructionPack, merge_packs
from .state import Artifact, Feedback, ProtocolState

# Which packs each operation's builder selects; the contract checks the result.
_OPERATION_PACKS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "draft_prompt": ("prompt", "conventions"),
        "revise_prompt": ("prompt", "conventions"),
        "draft_plan": ("plan", "conventions"),
        "revise_plan": ("plan", "conventions"),
        "execute": ("execution",),
        "interpret_review": ("review",),
    }
)


@dataclass(frozen=True, slots=True)
class Projection:
    """A compiled phase context: the request to send and what went into it."""

    request: ModelRequest
    manifest: dict[str, Any]

    @property
    def sha256(self) -> str:
        value: str = self.manifest["projection_sha256"]
        return value


# -- preconditions ------------------------------------------------------------------


def _fail(state: ProtocolState, operation: str, reason: str) -> ProtocolStateError:
    return ProtocolStateError(f"{operation} for instance {state.instance_id!r}: {reason}")


def _confirmed_prompt(state: ProtocolState, operation: str) -> Artifact:
    prompt = state.prompt
    if prompt is None or prompt.status != "confirmed":
        raise _fail(state, operation, "the current prompt is not confirmed")
    return prompt


def _under_revision(state: ProtocolState, operation: str, kind: str) -> tuple[Artifact, Feedback]:
    pending = state.pending_feedback
    current = state.prompt if kind == "prompt" else state.plan
    if pending is None or pending.kind != kind or current is None or current.version != pending.version:
        raise _fail(state, operation, f"no feedback is pending on the current {kind}")
    return current, pending


# -- per-operation builders -----------------------------------------------------------


def _drafts_fenced(state: ProtocolState) -> bool:
    """Unconfirmed model drafts render inside an envelope from protocol version 2 on."""
    return state.protocol_version >= 2


def _body_draft_prompt(state: ProtocolState) -> list[Block]:
    blocks = [b.constraints(state)]
    if state.sources:
        blocks.append(b.source_references(state))
    blocks.append(b.request(state))
    return blocks


def _body_revise_prompt(state: ProtocolState) -> list[Block]:
    base, pending = _under_revision(state, "revise_prompt", "prompt")
    return [
        *_body_draft_prompt(state),
        b.artifact("prompt_draft", base, confirmed=False, fence=_drafts_fenced(state)),
        b.feedback("prompt_feedback", pending),
    ]


def _body_draft_plan(state: ProtocolState) -> list[Block]:
    prompt = _confirmed_prompt(state, "draft_plan")
    return [b.constraints(state), b.artifact("confirmed_prompt", prompt, confirmed=True)]


def _body_revise_plan(state: ProtocolState) -> list[Block]:
    prompt = _confirmed_prompt(state, "revise_plan")
    plan, pending = _under_revision(state, "revise_plan", "plan")
    return [
        b.constraints(state),
        b.artifact("confirmed_prompt", prompt, confirmed=True),
        b.artifact("plan_draft", plan, confirmed=False, fence=_drafts_fenced(state)),
        b.feedback("plan_feedback", pending),
    ]


def _body_execute(state: ProtocolState) -> list[Block]:
    prompt = _confirmed_prompt(state, "execute")
    plan = state.plan  # None when it was drafted from another prompt version
    if plan is None or plan.status != "confirmed" or plan.basis != prompt.ref:
        raise _fail(
            state, "execute", f"no confirmed plan answers the current prompt (version {prompt.version})"
        )
    if state.output_mode is None:
        raise _fail(state, "execute", "no output mode was selected")
    blocks = [
        b.constraints(state),
        b.artifact("confirmed_prompt", prompt, confirmed=True),
        b.artifact("confirmed_plan", plan, confirmed=True),
    ]
    if state.sources:
        blocks.append(b.task_inputs(state))
    if any(i.answer is not None for i in state.inputs):
        blocks.append(b.execution_input(state))
    blocks.append(b.output_mode(state.output_mode))
    return blocks


def _body_interpret_review(state: ProtocolState) -> list[Block]:
    """The feedback, the confirmed prompt and the displayed plan: what the verdict needs, nothing else."""
    prompt = _confirmed_prompt(state, "interpret_review")
    plan, review = state.plan, state.pending_review
    if plan is None or review is None or review.version != plan.version:
        raise _fail(state, "interpret_review", "no feedback on the displayed plan is pending")
    return [
        b.constraints(state),
        b.artifact("confirmed_prompt", prompt, confirmed=True),
        # A new operation: its draft is fenced whatever the instance's version.
        b.artifact(
            "plan_draft",
            plan,
            confirmed=False,
            fence=True,
            title="Response Plan Pseudocode displayed for review",
        ),
        b.review_feedback(review),
    ]


_BODIES: Mapping[str, Callable[[ProtocolState], list[Block]]] = MappingProxyType(
    {
        "draft_prompt": _body_draft_prompt,
        "revise_prompt": _body_revise_prompt,
        "draft_plan": _body_draft_plan,
        "revise_plan": _body_revise_plan,
        "execute": _body_execute,
        "interpret_review": _body_interpret_review,
    }
)


def _check_regions(prefix: Sequence[RenderedItem], body: Sequence[RenderedItem]) -> None:
    """Prefix items are Region A, body items Region B in table order (every class declared)."""
    for item in prefix:
        if region_of(item.region_class) != "A":
            raise ProjectionContractError(f"{item.region_class!r} is not a prefix (Region A) class")
    last = -1
    for item in body:
        if region_of(item.region_class) != "B":
            raise ProjectionContractError(f"{item.region_class!r} is not a body (Region B) class")
        rank = order_of(item.region_class)
        if rank < last:
            raise ProjectionContractError(f"body order violated at {item.region_class!r}")
        last = rank


class ProjectionCompiler:
    """Compiles ``(state, operation)`` into a ``Projection``; pure and deterministic.

    Two compiles of one state give byte-identical requests and manifests while
    the estimator's correction factors are unchanged (only the manifest's
    token figures read them; ``projection_sha256`` never does).
    """

    def __init__(
        self,
        *,
        packs: Mapping[str, InstructionPack] | None = None,
        contracts: Mapping[str, OperationContract] | None = None,
        estimator: Estimator | None = None,
        model_id: str = "default",
        max_output_tokens: int = 8192,
        framing: str | None = None,
    ) -> None:
        self.packs = merge_packs(packs)
        merged = dict(CONTRACTS)
        for name, contract in (contracts or {}).items():
            if name not in _BODIES:
                raise ModelValidationError(
                    "contracts", name, f"unknown operation; expected one of {list(_BODIES)}"
                )
            if not isinstance(contract, OperationContract) or contract.operation != name:
                raise ModelValidationError(
                    "contracts", name, "expected an OperationContract for this operation"
                )
            merged[name] = contract
        self.contracts: Mapping[str, OperationContract] = MappingProxyType(merged)
        self.estimator: Estimator = estimator if estimator is not None else cast(Estimator, TokenEstimator())
        if not isinstance(model_id, str) or not model_id:
            raise ModelValidationError("ProjectionCompiler", "model_id", "expected a non-empty str")
        if (
            not isinstance(max_output_tokens, int)
            or isinstance(max_output_tokens, bool)
            or max_output_tokens < 1
        ):
            raise ModelValidationError(
                "ProjectionCompiler",
                "max_output_tokens",
                f"expected a positive int, got {max_output_tokens!r}",
            )
        if framing is not None and (not isinstance(framing, str) or not framing.strip()):
            raise ModelValidationError("ProjectionCompiler", "framing", "expected a non-empty str")
        self.model_id = model_id
        self.max_output_tokens = max_output_tokens
        #: None: each instance gets the framing of its protocol version (``blocks.FRAMINGS``).
        self.framing = framing

    def contract(self, operation: str) -> OperationContract:
        try:
            return self.contracts[operation]
        except KeyError:
            raise ModelValidationError(
                "project",
                "operation",
                f"unknown operation {operation!r}; expected one of {list(self.contracts)}",
            ) from None

    def operation_for(self, state: ProtocolState) -> str | None:
        """The operation ``state``'s stage projects, if any (review, waiting and closed stages: none)."""
        for name, contract in self.contracts.items():
            if contract.stage == state.stage:
                return name
        return None

    def compile(self, state: ProtocolState, operation: str) -> Projection:
        if not isinstance(state, ProtocolState):
            raise ModelValidationError(
                "project", "state", f"expected ProtocolState, got {type(state).__name__}"
            )
        contract = self.contract(operation)
        if state.protocol_version not in FRAMINGS:
            raise ModelValidationError(
                "project", "state", f"unknown protocol version {state.protocol_version!r}"
            )
        if state.stage != contract.stage:
            raise ProtocolStateError(
                f"operation {operation!r} is not allowed for instance {state.instance_id!r} in stage "
                f"{state.stage!r}; it runs in stage {contract.stage!r}"
            )
        prefix_blocks, clauses = self._prefix(state, contract)
        body_blocks = _BODIES[operation](state)
        tools = state.tools if operation == "execute" else ()
        symbols = (
            [s for s, _ in prefix_blocks] + [s for s, _ in body_blocks] + ([TOOLS_SYMBOL] if tools else [])
        )
        check_symbols(contract, symbols, available_symbols(state))
        prefix = tuple(item for _, item in prefix_blocks)
        body = tuple(item for _, item in body_blocks)
        _check_regions(prefix, body)

        prefix_sha, body_sha = items_sha256(prefix), items_sha256(body)
        request = ModelRequest(
            prefix=prefix,
            body=body,
            tools=tools,
            max_output_tokens=self.max_output_tokens,
            # The framing is shared by every operation; the end of the prefix by every instance of this one.
            cache_breakpoints=(0, len(prefix) - 1),
            metadata={
                "operation": operation,
                "instance_id": state.instance_id,
                "prefix_sha256": prefix_sha,
                "body_sha256": body_sha,
            },
        )
        manifest: dict[str, Any] = {
            "operation": operation,
            "instance_id": state.instance_id,
            "stage": state.stage,
            "symbols": symbols,
            "clauses": clauses,
            "artifacts": _artifact_refs(body_blocks, state),
            "tokens": self._tokens(prefix, body, tools),
            "model_id": self.model_id,
            "prefix_sha256": prefix_sha,
            "body_sha256": body_sha,
            "projection_sha256": payload_hash(request.to_dict()),
        }
        if state.protocol_version != 1:
            # Version-1 manifests keep their exact bytes.
            manifest["protocol_version"] = state.protocol_version
        return Projection(request, manifest)

    # -- internals ------------------------------------------------------------------

    def _prefix(
        self, state: ProtocolState, contract: OperationContract
    ) -> tuple[list[Block], list[dict[str, str]]]:
        op, version = contract.operation, state.protocol_version
        text = FRAMINGS[version] if self.framing is None else self.framing
        blocks = [
            b.item("framing", "system", text),
            b.item("operation", "system", f"Operation: {op}\n{contract.task}"),
        ]
        framing = Clause("framing", text)
        clauses = [{"pack": "framing", "clause_id": framing.clause_id, "sha256": framing.sha256}]
        names = _OPERATION_PACKS[op]
        if op == "execute" and state.output_mode == "pseudocode":
            names = (*names, "conventions")
        for name in names:
            pack = self.packs[name]
            selected = pack.select(op, version)
            if not selected:
                continue  # the contract reports the missing symbol
            blocks.append(b.item(PACK_SYMBOLS[name], "system", pack.render(selected)))
            clauses.extend({"pack": name, "clause_id": c.clause_id, "sha256": c.sha256} for c in selected)
        return blocks, clauses

    def _tokens(
        self, prefix: Sequence[RenderedItem], body: Sequence[RenderedItem], tools: Sequence[object]
    ) -> dict[str, int]:
        est, model = self.estimator, self.model_id
        raw_prefix = sum(est.raw_estimates(prefix, model))
        raw_body = sum(est.raw_estimates(body, model))
        raw_tools = sum(est.raw_estimates(tools, model)) if tools else 0
        return {
            "prefix": est.corrected(raw_prefix, model),
            "body": est.corrected(raw_body, model),
            "tools": est.corrected(raw_tools, model),
            "total": est.corrected(raw_prefix + raw_body + raw_tools, model),
        }


def _artifact_refs(blocks: Sequence[Block], state: ProtocolState) -> list[dict[str, Any]]:
    """Which artifact versions the body carries (by symbol), for audit."""
    by_symbol = {
        "confirmed_prompt": state.prompt,
        "prompt_draft": state.prompt,
        "confirmed_plan": state.plan,
        "plan_draft": state.plan,
    }
    out = []
    for symbol, _ in blocks:
        artifact = by_symbol.get(symbol)
        if artifact is not None:
            out.append(
                {
                    "symbol": symbol,
                    "kind": artifact.kind,
                    "version": artifact.version,
                    "digest": artifact.digest,
                }
            )
    return out


def symbols_of(request: ModelRequest) -> list[str]:
    """The symbols a compiled request carries, in order (``tools`` last): for inspection and tests."""
    symbols = [symbol_of(item.region_class) for item in (*request.prefix, *request.body)]
    if request.tools:
        symbols.append(TOOLS_SYMBOL)
    return symbols


__all__ = [
    "OUTPUT_MODE_TEXT",
    "PHASE_FRAMING",
    "PHASE_FRAMING_V2",
    "Projection",
    "ProjectionCompiler",
    "symbols_of",
]
