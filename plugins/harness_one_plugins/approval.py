"""The ``approval`` plugin: calls that need a person's decision before they run.

A call of a tool that requires approval does not run: it comes back as
:class:`ApprovalRequired` (``kind == "approval_required"``) carrying its call id, tool and
arguments, and waits. The application decides by call id (:meth:`ApprovalPlugin.approve`,
:meth:`ApprovalPlugin.deny`) and resumes it (:meth:`ApprovalPlugin.resume`, or by making the
same call again with the same call id): an approved call then runs through every policy; a
denied one is refused with :class:`ApprovalDenied`, whose text the model can read. An approval
holds for the call it was given for: while it is unused, and for ``ttl`` after it was used,
expired or withdrawn, a call with the same id and other arguments is refused with
:class:`ApprovalConflict`; while the approved call runs, and for ``ttl`` after it was used, the
same call again under that id is refused too (it is not held for a second decision): it runs,
ran, or was denied, already.
"""

from __future__ import annotations

import copyreg
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from harness_one import (
    Call,
    CallResult,
    Clock,
    PluginError,
    Retry,
    SystemClock,
    Tool,
    ToolDefinitionError,
    ToolError,
    ToolRegistry,
    applies_to,
    fingerprint,
    hookimpl,
)
from harness_one.state import WallClock, copied

from ._options import count, flag, provides, seconds

__all__ = ["ApprovalConflict", "ApprovalDenied", "ApprovalNotFound", "ApprovalPlugin", "ApprovalRequired", "PendingCall"]

_GRANTED = "approval.granted"
_USED = "approval.used"  # an attempt of the approved call ran its tool


class ApprovalRequired(ToolError):
    """The call did not run: it waits for a decision on ``call_id`` (its ``tool`` and ``arguments`` are here)."""

    kind = "approval_required"  # harness_one's APPROVAL_REQUIRED: dispatch and the loop recognise it

    def __init__(self, *, tool: str, call_id: str, arguments: Mapping[str, Any], holder: ApprovalPlugin | None = None) -> None:
        self.arguments = _own(arguments)  # the application's to show or mask: not the held call's
        self._holder = holder
        super().__init__(
            f"The call of '{tool}' needs a person's approval before it runs; it is waiting for a decision "
            f"(call id {call_id}). Do not call it again: its result comes once it is approved.",
            tool=tool,
            call_id=call_id,
        )

    def withdraw(self) -> bool:
        """Nobody will be asked about this call: :meth:`ApprovalPlugin.withdraw` it from the plugin that holds it.

        For an adapter that tells the model the call was not run. False if it waited no more.
        """
        return self._holder is not None and self.call_id is not None and self._holder.withdraw(self.call_id) is not None

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "arguments": self.arguments}


class ApprovalDenied(ToolError):
    """The call was denied by the person who decides; ``reason`` is what they said, if anything."""

    kind = "approval_denied"

    def __init__(self, reason: str | None = None, *, tool: str | None = None, call_id: str | None = None) -> None:
        self.reason = reason
        why = f": {reason.strip()}" if reason and reason.strip() else ""
        super().__init__(
            f"The call of '{tool}' was denied{why}. Do not make it again with these arguments; "
            "continue without it, or ask the user what to do instead.",
            tool=tool,
            call_id=call_id,
        )

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if self.reason:
            data["reason"] = self.reason
        return data


class ApprovalConflict(ToolError):
    """Another call waits for a decision, or was decided, under this call id (a call id names one call);
    or :meth:`ApprovalPlugin.approve` / :meth:`ApprovalPlugin.deny` would change a decision made."""

    kind = "approval_conflict"


class ApprovalNotFound(ToolError):
    """No call waits for a decision (or, for :meth:`ApprovalPlugin.resume`, has one) under that call id."""

    kind = "approval_not_found"


@dataclass(frozen=True)
class PendingCall:
    """A call waiting for a decision, with what is needed to run it again."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    context: dict[str, Any]
    idempotency_key: str | None
    #: When approval was asked for, on the registry's clock.
    requested: float
    fingerprint: str = field(repr=False)
    #: The registry the call was made on (for a :meth:`ApprovalPlugin.grant`, the one it was granted for).
    registry: ToolRegistry = field(repr=False, compare=False)
    #: Whether a framework's approval step approved it (:meth:`ApprovalPlugin.grant`): not a person's
    #: decision made here, never resumed.
    granted: bool = False
    #: Held only: the context as it was asked with, by key (:func:`_seen`): ``context`` keeps the caller's objects.
    _seen: dict[str, tuple[Any, bool]] = field(default_factory=dict, repr=False, compare=False)
    #: The tool itself, as registered when asked (or granted): a tool added again under its name (``replace=True``)
    #: is another tool, which the decision was not made for.
    _tool: Tool | None = field(default=None, repr=False, compare=False)


def _handed(held: PendingCall) -> PendingCall:
    """A copy of a held call to hand out: its arguments and context the caller's to change (an
    approval screen that edits what it shows changes nothing the plugin holds or resumes, nor the
    caller's context). Its context is the one the call was asked with: a copy of what was seen then,
    and the caller's own objects where they equal only themselves (a session or user object)."""
    memo: dict[int, tuple[Any, Any]] = {}
    shown = {key: _owned(seen, memo) if by_content else held.context[key] for key, (seen, by_content) in held._seen.items()}
    return replace(held, arguments=_own(held.arguments), context=shown)


@dataclass(frozen=True, slots=True)
class _Decision:
    approved: bool
    call: PendingCall
    reason: str | None
    decided: float


def _is_async(rule: object) -> bool:
    """An ``async def`` predicate (its coroutine would be truthy, never awaited): refused."""
    return inspect.iscoroutinefunction(rule) or (callable(rule) and inspect.iscoroutinefunction(type(rule).__call__))


class ApprovalPlugin:
    """Holds back calls that need approval until the application approves or denies them.

    Per tool, ``options={"requires_approval": True}`` or a predicate over the call
    (``lambda call: call.arguments["amount"] > 100``). Off by default: with no options no
    tool needs approval and the plugin costs nothing.

    Args:
        require: the rule for tools that declare none (``True`` or a predicate; default none).
        destructive: whether tools marked ``destructive=True`` need approval (when they declare no rule),
            whatever ``require`` says of them.
        ttl: seconds a pending call or an unused decision is kept, and a used, expired or withdrawn
            decision's call id refuses other calls (and a used one the same call; default one hour).
        max_pending: at most this many pending calls, decisions and spent decisions are kept (oldest dropped first).
        clock: time source (default: the clock of the registry it is added to; a plugin that took one registry's
            clock refuses a registry on another with :class:`PluginError`: give one to share it between them; two
            ``SystemClock()``, or two ``WallClock()``, are one clock).
    """

    name = "approval"
    order = 65  # pre_call, tryfirst: after an idempotency replay and the budget, before a cache hit or a token

    def __init__(
        self,
        *,
        require: bool | Callable[[Call], bool] = False,
        destructive: bool = False,
        ttl: float = 3600.0,
        max_pending: int = 10_000,
        clock: Clock | None = None,
    ) -> None:
        if not (isinstance(require, bool) or callable(require)) or _is_async(require):
            raise ValueError(f"approval require must be true, false or a (sync) predicate over the call, got {require!r}")
        self.require = require
        self.destructive = flag(destructive, "approval destructive")
        self.ttl = seconds(ttl, "approval ttl")
        self.max_pending = count(max_pending, "approval max_pending")
        self.clock: Clock | None = provides(clock, "approval clock", "a clock", ("now",), optional=True)
        #: Whether the plugin took the first registry's clock (no ``clock`` given): a registry on another is refused.
        #: (The clock only is held, not that registry: a plugin shared by registries keeps none of them alive.)
        self._clock_taken = False
        self._rules: dict[Tool, Callable[[Call], bool] | bool] = {}
        self._pending: OrderedDict[str, PendingCall] = OrderedDict()
        self._decisions: OrderedDict[str, _Decision] = OrderedDict()
        #: Decisions given back (a later policy refused the approved call) and put back last among ``_decisions``,
        #: out of their time order, by call id: the sweep checks each of them, as it stops at the first fresh one in order.
        self._given_back: dict[str, _Decision] = {}
        #: Approvals a call took and has not settled (it runs, or waits for its next attempt), by call id.
        self._in_use: dict[str, _Decision] = {}
        #: The calls whose decisions were used, expired or withdrawn, when, and the decision if one was used,
        #: by call id: for ``ttl`` another call under the id is refused, and the same call too if its decision
        #: was used, so a repeated approve() never approves it.
        self._spent: OrderedDict[str, tuple[PendingCall, float, _Decision | None]] = OrderedDict()
        self._lock = threading.Lock()
        self.approved = 0
        self.denied = 0

    def rule_for(self, tool: Tool) -> Callable[[Call], bool] | bool:
        """``True``, a predicate, or ``False`` (no approval) for ``tool``."""
        rule = tool.options.get("requires_approval")
        if rule is None:
            # A destructive tool needs approval whatever ``require`` says (a predicate is no way out of it).
            rule = True if self.destructive and tool.destructive else self.require
        if not (isinstance(rule, bool) or callable(rule)) or _is_async(rule):
            raise ToolDefinitionError(
                f"Tool '{tool.name}': requires_approval must be true, false or a (sync) predicate over the call, got {rule!r}.",
                tool=tool.name,
            )
        return rule

    def needs_approval(
        self,
        registry: ToolRegistry,
        tool: Tool,
        arguments: Mapping[str, Any],
        *,
        context: Mapping[str, Any] | None = None,
        call_id: str | None = None,
    ) -> bool:
        """Whether a call of ``tool`` with these arguments would wait for a decision (the rule, without calling).

        A predicate sees the arguments as the call would: checked by the registry's
        validation plugin, defaults filled in. Arguments it refuses need no approval, whatever
        the rule (``requires_approval=True`` too): the call itself is refused with the readable
        error. Nor does a call whose predicate raises: the
        call fails closed with a :class:`PluginError` that no decision could lift.
        """
        rule = self._rules.get(tool)
        if rule is None:
            rule = self.rule_for(tool)
        if rule is False:
            return False
        checked = _checked(registry, tool, arguments)
        if checked is None:
            return False
        if rule is True:
            return True
        try:
            return bool(rule(Call(registry, tool, checked, context, call_id)))
        except Exception:
            return False

    @hookimpl
    def harness_configure(self, registry: ToolRegistry) -> None:
        if self.clock is None:
            self.clock, self._clock_taken = registry.clock, True
        elif self._clock_taken and not _same_clock(registry.clock, self.clock):
            # One ttl for every held call and decision, on one clock: a second registry's would be timed on the first's.
            raise PluginError(
                "The approval plugin times its ttl on the clock of the registry it was first added to, and this "
                f"registry has another ({registry.clock!r}, not {self.clock!r}): give the plugin its own clock "
                "(ApprovalPlugin(clock=...)) to share it between registries on different clocks.",
                plugin=self.name,
            )

    @hookimpl
    def harness_tool_added(self, tool: Tool) -> None:
        rule = self.rule_for(tool)
        if rule is not False:
            self._rules[tool] = rule

    @hookimpl
    def harness_tool_removed(self, tool: Tool) -> None:
        self._rules.pop(tool, None)

    def _now(self, call: Call | None = None) -> float:
        clock = self.clock or (call.registry.clock if call is not None else None)
        return clock.now() if clock is not None else 0.0

    def _sweep(self, now: float) -> None:
        """Drop pending calls, decisions and spent ones older than ``ttl``, and the oldest beyond ``max_pending``."""
        while self._pending:
            first = next(iter(self._pending.values()))
            if now - first.requested <= self.ttl and len(self._pending) <= self.max_pending:
                break
            self._spend(*self._pending.popitem(last=False), now)  # a stale approve() must not approve another
        while self._decisions:
            decided = next(iter(self._decisions.values()))
            if now - decided.decided <= self.ttl and len(self._decisions) <= self.max_pending:
                break
            gone, decision = self._decisions.popitem(last=False)
            self._spend(gone, decision.call, now)
        for call_id, decision in list(self._given_back.items()):  # few: approvals a later policy refused, not yet used
            if self._decisions.get(call_id) is not decision:  # used, withdrawn or dropped since
                del self._given_back[call_id]
            elif now - decision.decided > self.ttl:
                del self._decisions[call_id], self._given_back[call_id]
                self._spend(call_id, decision.call, now)
        while self._spent:
            _, spent, _ = next(iter(self._spent.values()))
            if now - spent <= self.ttl:
                break
            self._spent.popitem(last=False)

    def _spend(self, call_id: str, asked: PendingCall, now: float, used: _Decision | None = None) -> None:
        """Keep a call whose decision was used (``used``), expired or withdrawn, or that was withdrawn or expired
        while it waited, for ``ttl``, at most ``max_pending`` (the oldest dropped first); not a grant's, which is
        not a person's decision."""
        if not asked.granted:
            self._spent[call_id] = (asked, now, used)
            self._spent.move_to_end(call_id)
            if len(self._spent) > self.max_pending:
                self._spent.popitem(last=False)

    @hookimpl(tryfirst=True)
    @applies_to(lambda plugin, tool: plugin.rule_for(tool) is not False)
    def harness_pre_call(self, call: Call) -> None:
        if call.peek(_GRANTED):
            return  # a later attempt of an approved call
        rule = self._rules.get(call.tool)
        if rule is None:  # a tool removed while its call runs
            rule = self.rule_for(call.tool)
        if rule is not True and not rule(call):  # type: ignore[operator]
            return
        call_id = call.call_id
        digest = fingerprint(call.arguments)
        now = self._now(call)
        with self._lock:
            self._sweep(now)
            decision = self._decisions.get(call_id)
            if decision is not None and now - decision.decided > self.ttl:  # an expired decision decides nothing
                del self._decisions[call_id]  # (checked here too, not left to the sweep alone)
                self._spend(call_id, decision.call, now)
                decision = None
            if decision is not None and _same_call(decision.call, call, digest):
                del self._decisions[call_id]  # used: only this call, with these arguments, had it
                if decision.approved:
                    call.state[_GRANTED] = decision  # given back if a later policy refuses the call
                    self._in_use[call_id] = decision
                    return
                self._spend(call_id, decision.call, now, decision)
                raise ApprovalDenied(decision.reason, tool=call.tool.name, call_id=call_id)
            # A person decided another call under this id (unused, under way, or spent within ttl), or
            # another call waits under it: not a new request to decide. (A grant is not a person's decision.)
            running = self._in_use.get(call_id)
            if decision is None and running is not None and _same_call(running.call, call, digest):
                _refuse_running(call)  # made again while its approved attempt runs: not a new request, not a second run
            decided, spent, waiting = decision or running, self._spent.get(call_id), self._pending.get(call_id)
            if spent is not None and spent[2] is not None and _same_call(spent[0], call, digest):
                _refuse_used(spent[2], call)  # made again (a re-sent turn): its decision was used, not a new request
            for other in (decided.call if decided else None, spent[0] if spent else None, waiting):
                if other is not None and not other.granted and not _same_call(other, call, digest):
                    what = "already waits for a decision" if other is waiting else "was already decided"
                    raise ApprovalConflict(
                        f"Another call of '{other.tool}' {what} under call id {call_id}; a call id names one call "
                        "(its tool as registered, arguments, context and idempotency key). Make this call with a new "
                        "call id.",
                        tool=call.tool.name,
                        call_id=call_id,
                    )
            self._pending[call_id] = PendingCall(
                call_id,
                call.tool.name,
                _own(call.arguments),  # its own copy: nothing the caller or a UI changes reaches the call that runs
                # The mapping's own copy, its values the call's (as a grant holds them): the resumed call has the
                # caller's very objects (what the tool writes to a session reaches the caller's); and what they were
                # when asked, so that it runs only in the context the person decided on (_seen).
                dict(call.context),
                call.idempotency_key,
                now,
                digest,
                call.registry,
                _seen=_seen(call.context),
                _tool=call.tool,
            )
            self._pending.move_to_end(call_id)
            self._sweep(now)
        raise ApprovalRequired(tool=call.tool.name, call_id=call_id, arguments=call.arguments, holder=self)

    @hookimpl
    @applies_to(lambda plugin, tool: plugin.rule_for(tool) is not False)
    def harness_post_call(self, call: Call) -> None:
        decision = call.peek(_GRANTED)
        if decision is not None:
            self._settle(call, decision, keep=False)

    @hookimpl(trylast=True)  # an observer: it decides nothing
    @applies_to(lambda plugin, tool: plugin.rule_for(tool) is not False)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        decision = call.peek(_GRANTED)
        if decision is None:
            return
        if call.ran:  # this attempt ran the tool: the approval is used, whatever later attempts meet
            call.state[_USED] = True
        if type(call.decision) is Retry:  # another attempt follows: the approval is still this call's
            return
        # Refused before its tool ever ran (a later policy): the approval still holds, for the same call again.
        self._settle(call, decision, keep=not call.peek(_USED))

    def _settle(self, call: Call, decision: _Decision, *, keep: bool) -> None:
        call_id, now = call.call_id, self._now(call)
        with self._lock:
            if self._in_use.get(call_id) is decision:
                del self._in_use[call_id]
            if keep:
                if call_id not in self._decisions:
                    self._give_back(call_id, decision)
                return
            if self._decisions.get(call_id) is decision:  # kept after an earlier attempt, used now
                del self._decisions[call_id]
            waiting = self._pending.get(call_id)
            if waiting is not None and _same_held(decision.call, waiting):  # the call that ran, held again: it is not
                del self._pending[call_id]  # decided (and run) a second time
            self._spend(call_id, decision.call, now, decision)

    def _give_back(self, call_id: str, decision: _Decision) -> None:
        """Put ``decision`` back among the unused ones, last, and among the given-back ones the sweep checks in full
        (the ordered sweep stops at the first fresh decision: one put back last with its old time would outlive
        ``ttl``). Under the lock; no other decision is moved."""
        self._decisions[call_id] = decision
        self._given_back[call_id] = decision

    # ------------------------------------------------------------------ the application's side

    def pending(self) -> list[PendingCall]:
        """The calls waiting for a decision, oldest first (none held longer than ``ttl``)."""
        with self._lock:
            self._sweep(self._now())
            return [_handed(found) for found in self._pending.values()]

    def _decide(self, call_id: str, approved: bool, reason: str | None) -> PendingCall:
        with self._lock:
            now = self._now()
            self._sweep(now)  # a call held longer than ttl waits no more
            found = self._pending.pop(call_id, None)
            if found is None:
                decided = self._decisions.get(call_id)
                if decided is not None and not decided.call.granted and now - decided.decided <= self.ttl:
                    if decided.approved is approved:  # the same decision again (a double click, a retried request)
                        return _handed(decided.call)
                    raise ApprovalConflict(
                        f"Call id '{call_id}' was {'approved' if decided.approved else 'denied'} already; a decision "
                        "is not changed. withdraw(call_id) drops it, and the call made again waits for a new decision.",
                        tool=decided.call.tool,
                        call_id=call_id,
                    )
                raise ApprovalNotFound(
                    f"No call waits for approval under call id '{call_id}'. It was decided already, withdrawn, or "
                    "held longer than the approval ttl, or the id is wrong: check the id, or make the call again "
                    "to hold it for a new decision.",
                    call_id=call_id,
                )
            self._decisions[call_id] = _Decision(approved, found, reason, now)
            self._decisions.move_to_end(call_id)
            self._sweep(now)
            if approved:
                self.approved += 1
            else:
                self.denied += 1
        return _handed(found)

    def approve(self, call_id: str) -> PendingCall:
        """Approve the pending call ``call_id``: the next call with that id and those arguments runs.

        Approving a call approved already (not yet used) changes nothing; one denied is :class:`ApprovalConflict`.
        """
        return self._decide(call_id, True, None)

    def grant(
        self,
        registry: ToolRegistry,
        tool: Tool,
        arguments: Mapping[str, Any],
        *,
        call_id: str,
        context: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> bool:
        """Record an approval given elsewhere (a framework's own approval step) for call ``call_id``.

        No pending call is needed: the adapter of a framework that asks the person itself
        grants the call it is about to make, which then runs through every policy. The grant
        holds for that call only, as a person's decision does: its id, tool and arguments (as
        checked by the validation plugin), the ``context`` and ``idempotency_key`` it will be made
        with, and ``registry``; it is used once, by the next such call. False if the arguments
        are refused (nothing granted).

        A grant does not replace a person's decision under ``call_id`` (approve or deny, unused, under way, or used
        within ``ttl``): that is :class:`ApprovalConflict`, and the call made under the id meets the person's
        decision. An earlier grant under the id is replaced.
        """
        checked = _checked(registry, tool, arguments)
        if checked is None:
            return False
        now = self._now()
        granted = PendingCall(
            call_id,
            tool.name,
            checked,
            # The mapping's own copy, its values the call's, and what they are now (as a held call's context).
            dict(context) if context else {},
            idempotency_key,
            now,
            fingerprint(checked),
            registry,
            granted=True,
            _seen=_seen(context or {}),
            _tool=tool,
        )
        with self._lock:
            self._sweep(now)
            spent = self._spent.get(call_id)
            for person in (self._decisions.get(call_id), self._in_use.get(call_id), spent[2] if spent else None):
                if person is not None and not person.call.granted:
                    raise ApprovalConflict(
                        f"Call id '{call_id}' was {'approved' if person.approved else 'denied'} already by a person; a "
                        "grant does not replace a person's decision. The call made under this id meets that decision.",
                        tool=tool.name,
                        call_id=call_id,
                    )
            self._decisions[call_id] = _Decision(True, granted, None, now)
            self._decisions.move_to_end(call_id)
            self._sweep(now)
            self.approved += 1
        return True

    def deny(self, call_id: str, reason: str | None = None) -> PendingCall:
        """Deny the pending call ``call_id``: the next call with that id is refused with :class:`ApprovalDenied`.

        Denying a call denied already (not yet used) changes nothing (its first reason stands); one approved
        is :class:`ApprovalConflict`.
        """
        return self._decide(call_id, False, reason)

    def withdraw(self, call_id: str) -> PendingCall | None:
        """Drop the call ``call_id`` from the queue: nobody will be asked about it, and it never runs.

        For a call the model was told was not run (an adapter of a framework that asks no
        person about it). Approving or resuming it afterwards is refused with :class:`ApprovalNotFound`
        (a decision made on it before it was withdrawn is dropped); the same call made again waits
        for a new decision. Returns the withdrawn call, or None if none waited.
        """
        with self._lock:
            now = self._now()
            self._sweep(now)  # a call held, or a decision kept, longer than ttl is not withdrawn: it is gone
            found = self._pending.pop(call_id, None)
            if found is not None:
                self._spend(call_id, found, now)  # as a decision withdrawn: the id refuses another call
                return _handed(found)
            decided = self._decisions.pop(call_id, None)  # decided between the hold and the withdrawal: it decides nothing now
            if decided is not None:
                self._spend(call_id, decided.call, now)
        return _handed(decided.call) if decided is not None else None

    def _decided(self, call_id: str) -> tuple[PendingCall, ToolRegistry]:
        with self._lock:
            now = self._now()
            self._sweep(now)
            found = self._decisions.get(call_id)
            if found is not None and now - found.decided > self.ttl:  # expired: it decides nothing
                del self._decisions[call_id]
                self._spend(call_id, found.call, now)
                found = None
        if found is None:
            raise ApprovalNotFound(
                f"No decision was made for call id '{call_id}': approve or deny a pending call first.", call_id=call_id
            )
        if found.call.granted:
            raise ApprovalNotFound(
                f"Call id '{call_id}' was granted, not asked for: make the call itself to run it.", call_id=call_id
            )
        return found.call, found.call.registry

    def resume(self, call_id: str) -> CallResult:
        """Make the decided call again: its result if approved, the :class:`ApprovalDenied` refusal if denied."""
        found, registry = self._decided(call_id)
        return registry.try_call(
            found.tool, found.arguments, context=found.context, call_id=found.call_id, idempotency_key=found.idempotency_key
        )

    async def aresume(self, call_id: str) -> CallResult:
        """The awaitable :meth:`resume`."""
        found, registry = self._decided(call_id)
        return await registry.atry_call(
            found.tool, found.arguments, context=found.context, call_id=found.call_id, idempotency_key=found.idempotency_key
        )

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        with self._lock:
            self._sweep(self._now())
            return {"pending": len(self._pending), "approved": self.approved, "denied": self.denied}


def _same_clock(one: Clock, other: Clock) -> bool:
    """Whether two clocks tell the same time: the same clock, or two of the stateless system clocks of one kind
    (``SystemClock()``, ``WallClock()``: each reads the process's one time source)."""
    return one is other or (type(one) is type(other) and type(one) in (SystemClock, WallClock))


_ATOMS = (str, int, float, bool, bytes, complex, type(Ellipsis), range, type)
_EQUAL_ONLY_TO_ITSELF: Any = object.__eq__  # a class's __eq__ when it defines none


def _own(values: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``values``: only what cannot be copied (a lock, a client) is shared, not the containers or
    objects holding it, so a change to a copy's nested value reaches no other copy."""
    try:
        return dict(copied(dict(values)))
    except TypeError:  # some value cannot be copied: each is copied on its own, down to the one that cannot
        memo: dict[int, tuple[Any, Any]] = {}
        return {key: _owned(value, memo) for key, value in values.items()}


def _owned(value: Any, memo: dict[int, tuple[Any, Any]]) -> Any:
    """A deep copy of ``value``, sharing only the values inside it that cannot be copied.

    ``memo``: by id, each value met and its copy (the value kept, so that its id names it), so that a value
    met twice, or inside itself, is copied once. A value whose deep copy fails is rebuilt as ``copy.deepcopy``
    would (its ``__reduce_ex__``: a dict or list subclass, a set, a named tuple, a dataclass), its parts copied
    here in turn; one that cannot be (a lock, a client, one with its own ``__deepcopy__``) is shared.
    """
    done = memo.get(id(value))
    if done is not None:
        return done[1]
    kind = type(value)
    if value is None or kind in _ATOMS:
        return value
    if kind is dict:
        held: dict[Any, Any] = {}
        memo[id(value)] = (value, held)
        held.update((key, _owned(item, memo)) for key, item in value.items())
        return held
    if kind is list:
        items: list[Any] = []
        memo[id(value)] = (value, items)
        items.extend(_owned(item, memo) for item in value)
        return items
    if kind is tuple:
        return tuple(_owned(item, memo) for item in value)
    try:
        mine = copied(value)
    except TypeError:
        mine = _rebuilt(value, memo)
    memo[id(value)] = (value, mine)
    return mine


def _rebuilt(value: Any, memo: dict[int, tuple[Any, Any]]) -> Any:
    """``value`` rebuilt from its ``__reduce_ex__`` with its parts copied by :func:`_owned` (as ``copy.deepcopy``
    rebuilds it), or ``value`` itself if it cannot be (it is then shared)."""
    if hasattr(value, "__deepcopy__"):
        return value  # copies itself, and could not: nothing inside it is reached
    try:
        reductor = copyreg.dispatch_table.get(type(value))
        parts = reductor(value) if reductor is not None else value.__reduce_ex__(4)
    except Exception:  # a lock, a socket, a client: cannot be copied, shared
        return value
    if not isinstance(parts, tuple) or not 2 <= len(parts) <= 6:
        return value  # a global (a module-level object named by its reduce value): itself
    make, args, state, listed, mapped = (*parts, None, None, None)[:5]
    try:
        mine = make(*(_owned(arg, memo) for arg in args))
        memo[id(value)] = (value, mine)
        if state is not None:
            state = _owned(state, memo)
            if hasattr(mine, "__setstate__"):
                mine.__setstate__(state)
            else:
                slots = None
                if isinstance(state, tuple) and len(state) == 2:
                    state, slots = state
                if state:
                    mine.__dict__.update(state)
                for name, item in (slots or {}).items():
                    setattr(mine, name, item)
        for item in listed or ():
            mine.append(_owned(item, memo))
        for key, item in mapped or ():
            mine[_owned(key, memo)] = _owned(item, memo)
    except Exception:  # not rebuilt: shared, as it is
        memo[id(value)] = (value, value)
        return value
    return mine


def _refuse_used(used: _Decision, call: Call) -> None:
    """Refuse ``call``, the call a person decided under its id, whose decision was used: denied again, or (approved) it ran."""
    if not used.approved:
        raise ApprovalDenied(used.reason, tool=call.tool.name, call_id=call.call_id)
    raise ApprovalConflict(
        f"The call of '{call.tool.name}' already ran under call id {call.call_id}, as approved; it is not held or run "
        "again under this id. Do not make it again unless it must run a second time: then make it with a new call id.",
        tool=call.tool.name,
        call_id=call.call_id,
    )


def _refuse_running(call: Call) -> None:
    """Refuse ``call``, made again under its id while the approved call runs (or waits for its next attempt)."""
    raise ApprovalConflict(
        f"The call of '{call.tool.name}' is running now under call id {call.call_id}, as approved; it is not held or "
        "run a second time under this id. Do not make it again: its result comes from the call under way.",
        tool=call.tool.name,
        call_id=call.call_id,
    )


def _same_held(asked: PendingCall, held: PendingCall) -> bool:
    """Whether ``held`` is the call ``asked`` was for (as :func:`_same_call`, between two held calls)."""
    if (asked.tool, asked.fingerprint) != (held.tool, held.fingerprint) or asked.registry is not held.registry:
        return False
    if asked._tool is not None and held._tool is not None and asked._tool is not held._tool:
        return False
    try:
        seen = {key: value if by_content else held.context[key] for key, (value, by_content) in held._seen.items()}
        return asked.idempotency_key == held.idempotency_key and _same_context(asked, seen)
    except Exception:  # an __eq__ that raises: not shown to be the same
        return False


def _same_call(asked: PendingCall, call: Call, digest: str) -> bool:
    """Whether ``call`` is the call ``asked`` was for (or granted for): its registry, tool and arguments, its context
    and idempotency key: who asks, and through which registry (one plugin may serve several), is part of it."""
    if (asked.tool, asked.fingerprint) != (call.tool.name, digest) or asked.registry is not call.registry:
        return False
    if asked._tool is not None and asked._tool is not call.tool:  # added again under its name since (replace=True)
        return False
    try:
        return asked.idempotency_key == call.idempotency_key and _same_context(asked, call.context)
    except Exception:  # an __eq__ that raises: not shown to be the same
        return False


def _seen(context: Mapping[str, Any]) -> dict[str, tuple[Any, bool]]:
    """What each value of ``context`` is as a call is held: ``(copy, True)`` for a value compared by content (its
    deep copy, :func:`_owned`, equals it), ``(value, False)`` for one equal only to itself (a session or user
    object, a client), compared by identity. Taken when the call is held, so that a nested value the caller
    changes afterwards (a reused request or session dict) is not the context the person decided on."""
    memo: dict[int, tuple[Any, Any]] = {}
    seen: dict[str, tuple[Any, bool]] = {}
    for key, value in context.items():
        if value is None or type(value) in _ATOMS:
            seen[key] = (value, True)
        elif type(value).__eq__ is _EQUAL_ONLY_TO_ITSELF:  # its identity is what it is
            seen[key] = (value, False)
        else:
            try:
                mine = _owned(value, memo)
                seen[key] = (mine, bool(mine == value))
            except Exception:  # not copied (nested deeper than a copy can go) or not compared: by identity
                seen[key] = (value, False)
    return seen


def _same_context(asked: PendingCall, context: Mapping[str, Any]) -> bool:
    """Whether ``context`` is the one ``asked`` was asked with: the same keys, each value equal to what it was then
    (by content), or the very object (one equal only to itself). May raise what a value's ``__eq__`` raises."""
    seen = asked._seen
    if len(context) != len(seen):
        return False
    for key, value in context.items():
        if key not in seen:
            return False
        was, by_content = seen[key]
        if not (was == value if by_content else was is value):
            return False
    return True


def _checked(registry: ToolRegistry, tool: Tool, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """``arguments`` as the registry's validation plugin passes them to the call, or None if it refuses them."""
    validation = registry.plugins.get("validation")
    compiled = getattr(validation, "compiled", None)
    if compiled is None:
        return dict(arguments)
    try:
        return dict(compiled(tool).check(dict(arguments), registry.limits, registry.clock))
    except Exception:
        return None
