"""Starting a run (issue 13, ADR 0011, ADR 0015): version 1 seeded from the log, and written
with the run's claim (``pick_up``) or with its user message too (``start_run``), in one
transaction (one call where the store takes a prediction, ADR 0013).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from ..core.canonical import canonical_json
from ..core.slices import finish_async, pause
from ..errors import ContextError
from ..model import Checkpoint, Principal, RunContext, UserMessage
from ..stores.events import Event, ItemRow, Lease, NewEvent, RawCheckpoint, Visibility, interned
from .checkpoints import checkpoint_from_rows, evolve
from .pairs import check_new_pairs
from .seeding import Seed, SeedRead, history_counts, prime_seed_steps, read_seed
from .session import item_event, logged
from .window import checkpoint_shell
from .windows import MARK_TYPES

if TYPE_CHECKING:
    from .loop import ContextLoop

CHECKPOINT_SEEDED = "run.checkpoint.seeded"
#: Counts stored per ``put_counts`` call of a seed's backfill.
COUNTS_PER_CALL = 2_048


class StartedRun(NamedTuple):
    """What ``start_run`` and ``pick_up`` return: the run, its lease and its version 1."""

    run: RunContext
    lease: Lease
    checkpoint: Checkpoint


class RunStarts:
    """A loop's run starts: version 1 built from the session's window and written."""

    def __init__(self, loop: ContextLoop) -> None:
        self.loop = loop

    async def seed(self, run: RunContext, principal: Principal | None) -> Seed:
        read = await self.read_seed(run, principal)
        await pause(len(read.history))
        return await finish_async(prime_seed_steps(self.loop.builder, run, read))

    async def read_seed(self, run: RunContext, principal: Principal | None) -> SeedRead:
        loop = self.loop
        plan = await loop.writes.plan_or_none(run.session_id)
        read = await read_seed(loop.store, loop.windows, loop.estimator, plan, run, principal)
        read.window.run(run.run_id).seeded = (read.carry, principal)
        return read

    async def seed_commit(
        self, run: RunContext, principal: Principal | None, holder: Lease | str
    ) -> tuple[Lease, Checkpoint]:
        """Version 1 written under ``holder``: a lease, or an owner to claim the run for first."""
        # Read before the write transaction: reading and decoding the window does not
        # hold the store's write lock (the log below the seed never changes).
        loop = self.loop
        read = await self.read_seed(run, principal)
        await pause(len(read.history))
        overlap = read.counted  # priming stores nothing: it runs while the write is out
        seed = (
            Seed(read.checkpoint, read.carry, read.counter, ())
            if overlap
            else await finish_async(prime_seed_steps(loop.builder, run, read))
        )
        # The checkpoint's hash before the write (in slices: a long history hashes a while).
        built = seed.checkpoint
        digest, _ = await finish_async(
            read.window.seed_digest_steps(checkpoint_shell(built), built.conversation)
        )
        seed = replace(seed, digest=digest)

        async def body(predicted: bool) -> tuple[Lease, Checkpoint, list[Event], list[RawCheckpoint]]:
            return await self.write_first(run, principal, holder, predicted, seed)

        sent = asyncio.Event()
        write = asyncio.ensure_future(
            loop.commits.run(
                body,
                session_id=run.session_id,
                run_id=run.run_id,
                next_sequence=loop.windows.next_sequence(run.session_id),
                version=1 if not isinstance(holder, Lease) or holder.epoch == 1 else None,
                on_sent=sent.set,
            )
        )
        if overlap:
            waiting = asyncio.ensure_future(sent.wait())
            try:
                # Until the write set is on its way (or the write is done: the ordinary path).
                await asyncio.wait([write, waiting], return_when=asyncio.FIRST_COMPLETED)
                await finish_async(prime_seed_steps(loop.builder, run, read))  # meanwhile
            except BaseException:
                await asyncio.wait([write])  # never leave the write's outcome behind
                raise
            finally:
                waiting.cancel()
        lease, checkpoint, events, written = await write
        if events:
            loop.writes.committed(run, written, events)
        return lease, checkpoint

    async def start(
        self,
        session_id: str,
        run_id: str,
        message: UserMessage,
        principal: Principal | None,
        *,
        owner: str,
        derivation_key: str | None = None,
        visibility: Visibility | None = None,
        max_output_tokens: int | None = None,
    ) -> StartedRun:
        """``ContextLoop.start_run``."""
        loop = self.loop
        # A run's turn starts empty (its history holds whole pairs): a result cannot open it.
        check_new_pairs((), [message], "start_run", "message")
        plan = await loop.writes.plan_or_none(session_id)
        new, restored = item_event(
            session_id, message, principal=principal, derivation_key=derivation_key, visibility=visibility
        )
        counts: list[tuple[int, int]] = []
        appended: list[int] = []

        async def body(
            predicted: bool,
        ) -> tuple[list[Event], RunContext, Lease, Checkpoint, list[Event], list[RawCheckpoint]]:
            stored, fresh = await loop.store.events.append_all([new])
            seed = logged(restored, session_id, stored[0].sequence)
            counts.clear()
            if plan is not None:
                # Stored with the run's first recorded step (one statement fewer); a run
                # that records nothing leaves it to the next seed, which counts what lacks one.
                counts.extend(history_counts(loop.estimator, plan.counting_key, [seed]))
            if fresh:  # the seed need not read back what it has just appended
                text = canonical_json(new.payload).decode("utf-8")
                count = counts[0][1] if counts else None
                row = ItemRow(seed.seq or 0, text, interned(new.visibility), count)
                if loop.windows.append_read(session_id, row.sequence, row, seed) is not None:
                    appended[:] = [row.sequence]
            run = RunContext(run_id, session_id, stored[0].sequence, max_output_tokens=max_output_tokens)
            return (stored, run, *await self.write_first(run, principal, owner, predicted))

        def retract() -> None:  # the predicted message was not committed
            if appended:
                loop.windows.retract(session_id, appended.pop())

        try:
            stored, run, lease, checkpoint, events, written = await loop.commits.run(
                body,
                session_id=session_id,
                run_id=run_id,
                next_sequence=loop.windows.next_sequence(session_id),
                version=1,
                on_miss=retract,
            )
        except BaseException:
            loop.windows.forget(session_id)  # it may have read rows that were rolled back
            raise
        # The seed read the user message into the window already: only the events are noted.
        window = loop.windows.window(session_id)
        window.committed(stored, MARK_TYPES)
        loop.writes.committed(run, written, events)
        if counts:
            window.run(run.run_id).pending = counts
        return StartedRun(run, lease, checkpoint)

    async def write_first(
        self,
        run: RunContext,
        principal: Principal | None,
        holder: Lease | str,
        predicted: bool,
        seed: Seed | None = None,
    ) -> tuple[Lease, Checkpoint, list[Event], list[RawCheckpoint]]:
        """Version 1 written inside the caller's transaction under ``holder``: a lease, or an
        owner to claim the run for first. The lease, the checkpoint, the events appended and
        the run's rows after the write."""
        if isinstance(holder, Lease):
            lease, first = holder, predicted
        else:
            lease = await self.loop.store.checkpoints.claim(run.run_id, holder)
            first = predicted or lease.epoch == 1
        # A run at its first lease has no checkpoint yet (predicted: or the store refuses
        # version 1, and the ordinary path reads what is there).
        rows = [] if first else await self.loop.store.checkpoints.latest_raw(run.run_id)
        return (lease, *await self.seed_and_write(run, principal, lease, rows, seed))

    async def seed_and_write(
        self,
        run: RunContext,
        principal: Principal | None,
        lease: Lease,
        rows: list[RawCheckpoint],
        seed: Seed | None = None,
    ) -> tuple[Checkpoint, list[Event], list[RawCheckpoint]]:
        """Version 1 built and written inside the caller's transaction (idempotent: see
        ``ContextLoop.pick_up``): the checkpoint, the events appended and the run's rows after
        the write."""
        loop = self.loop
        if seed is None:
            seed = await self.seed(run, principal)
        built = seed.checkpoint
        # The hash of built.to_dict(), continued from this session's previous seed when it can be.
        digest = seed.digest
        if digest is None:
            window = loop.windows.window(run.session_id)
            digest, _ = window.seed_digest(checkpoint_shell(built), built.conversation)
        payload = {
            "run_id": run.run_id,
            "seed_sequence": run.seed_sequence,
            "history_items": len(built.conversation) - 1,
            "checkpoint_sha256": digest,
        }
        event = NewEvent(
            session_id=run.session_id,
            type=CHECKPOINT_SEEDED,
            payload=payload,
            derivation_key=f"run.checkpoint.seeded:{run.run_id}",
            run_id=run.run_id,
        )
        existing = await checkpoint_from_rows(loop.store, run.run_id, rows)
        if existing is not None:
            if existing == built:
                return existing, [], rows
            raise ContextError(
                f"run {run.run_id!r} already has checkpoint version {existing.version}; "
                "version 1 is written once, when the run starts or is picked up "
                "(load a later one with latest_checkpoint)"
            )
        stored, _ = await loop.store.events.append_all([event])
        if seed.backfill and seed.counter is not None:
            # A few thousand a call: each call checks (and, predicted, queues) its counts in
            # one stretch on the event loop.
            for at in range(0, len(seed.backfill), COUNTS_PER_CALL):
                await loop.store.events.put_counts(
                    run.session_id, seed.counter, seed.backfill[at : at + COUNTS_PER_CALL]
                )
            await finish_async(loop.windows.record_tokens(run.session_id, seed.counter, seed.backfill))
        version, written = await loop.writes.write(run, built, "seeded", lease, rows=rows)
        return evolve(built, version=version), stored, written


__all__ = ["CHECKPOINT_SEEDED", "RunStarts", "StartedRun"]
