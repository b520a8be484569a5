"""Kit checks the broken package and plugin of test_conformance do not reach: each fails (or is
switched off) for a subject that breaks exactly it."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

INNER = '''
from harness_one import Tool, defineTool, hookimpl
from harness_one.testing import PluginTests, ToolPackageTests


class AsyncHook:
    name = "async_hook"

    @hookimpl
    async def harness_pre_call(self, call):
        return None


class Lingering:
    """Leaves a twin behind: unregistered, blocked or replaced, its hooks still run."""

    name = "lingering"

    def __init__(self, twin=True):
        self.twin = twin

    @hookimpl
    def harness_tool_added(self, tool, registry):
        if self.twin and "lingering-twin" not in registry.plugins:
            registry.plugins.register(Lingering(twin=False), "lingering-twin")

    @hookimpl
    def harness_pre_call(self, call):
        return None


class Quiet:
    name = "quiet"

    @hookimpl
    def harness_pre_call(self, call):
        return None


@defineTool(registry=None)
def shaped(x: int) -> int:
    """Return x."""
    return x


@defineTool(registry=None)
def labelled(labels: dict[str, int]) -> int:
    """Count the labels."""
    return len(labels)


def hand_built(parameters):
    made = Tool.create(lambda x: x, name="hand_built", description="Return x.")
    made.parameters = parameters  # what the kit checks again: a tool changed after it was defined
    return made


class TestAsyncHook(PluginTests):
    plugin_factory = AsyncHook


class TestLingering(PluginTests):
    plugin_factory = Lingering


class TestNotShipped(PluginTests):
    plugin_factory = Quiet
    entry_point = "quiet"  # no distribution ships it


class TestSyncOnly(PluginTests):
    plugin_factory = Quiet
    supports_async = False


class TestNotAnObject(ToolPackageTests):
    tools = [hand_built({"type": "string"})]


class TestNotJson(ToolPackageTests):
    tools = [hand_built({"type": "object", "properties": {"x": {"enum": [{1, 2}]}}})]


class TestTooSlow(ToolPackageTests):
    distribution = "harness-one-calculate"
    load_budget = 0.0  # no import is that fast: the bound is checked


class TestNotStrict(ToolPackageTests):
    tools = [shaped, labelled]
    supports_strict = False
'''


def test_the_checks_the_broken_suites_do_not_reach_can_fail(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_kit_checks_inner=INNER)
    inner = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")  # its own process: nothing it loads stays
    text = inner.stdout.str()
    got = dict(re.findall(r"::(\w+::\w+) (PASSED|FAILED|SKIPPED)", text))
    assert got["TestAsyncHook::test_hooks_are_plain_functions"] == "FAILED"
    assert "harness_pre_call is a coroutine or generator" in text
    for check in ("test_registers_and_unregisters", "test_blocked_by_name", "test_replaced_by_name"):
        assert got[f"TestLingering::{check}"] == "FAILED"
    assert "the plugin's hooks still ran" in text
    assert got["TestSyncOnly::test_async_calls"] == "SKIPPED" and got["TestSyncOnly::test_hooks_are_plain_functions"] == "PASSED"
    assert got["TestNotAnObject::test_parameters_are_object_schemas"] == "FAILED"
    assert "the root is not 'type': 'object'" in text
    assert got["TestNotJson::test_export_every_format"] == "FAILED"
    assert "to import (load_budget = 0.0 s)" in text
    assert "TestTooSlow: tuned: load_budget = 0.0 (the kit's: 2.0)" in text  # listed in the summary
    assert got["TestNotShipped::test_entry_point"] == "FAILED"
    assert got["TestNotStrict::test_strict_openai_export"] == "PASSED"  # labelled cannot be strict: allowed, and named


STORES = '''
import pytest
from harness_one.state import MemoryBudgets, MemoryStore
from harness_one.testing import BudgetStoreContract, IdempotencyStoreContract


class Unowned:
    """An idempotency store written before owners."""

    def __init__(self):
        self.inner = MemoryStore()

    def begin(self, scope, key, fingerprint, now, lease):
        return self.inner.begin(scope, key, fingerprint, now, lease)

    def renew(self, scope, key, now, lease):
        return self.inner.renew(scope, key, now, lease)

    def finish(self, scope, key, record):
        self.inner.finish(scope, key, record)

    def release(self, scope, key):
        self.inner.release(scope, key)


class OwnerBlind(Unowned):
    """Takes owner= and ignores it: a lapsed owner frees and overwrites another caller's claim."""

    def begin(self, scope, key, fingerprint, now, lease, *, owner=None):
        return self.inner.begin(scope, key, fingerprint, now, lease)

    def renew(self, scope, key, now, lease, *, owner=None):
        return self.inner.renew(scope, key, now, lease)

    def finish(self, scope, key, record, *, owner=None, now=None):
        self.inner.finish(scope, key, record)
        return True

    def release(self, scope, key, *, owner=None):
        self.inner.release(scope, key)


class OwnersPerHandle(OwnerBlind):
    """Records shared by its handles, but each handle remembers the owners (and leases) of the claims it made."""

    def __init__(self, records=None):
        self.inner = MemoryStore() if records is None else records
        self.owners, self.leases = {}, {}

    def mine(self, key, owner):
        return owner is None or self.owners.get(key) == owner

    def begin(self, scope, key, fingerprint, now, lease, *, owner=None):
        found = self.inner.begin(scope, key, fingerprint, now, lease)
        if found is None:
            self.owners[key], self.leases[key] = owner, now + lease
        return found

    def renew(self, scope, key, now, lease, *, owner=None):
        return self.mine(key, owner) and self.inner.renew(scope, key, now, lease)

    def finish(self, scope, key, record, *, owner=None, now=None):
        if not self.mine(key, owner) and self.leases.get(key, 0) > now:
            return False  # another caller's live claim
        return super().finish(scope, key, record)

    def release(self, scope, key, *, owner=None):
        if self.mine(key, owner):
            self.inner.release(scope, key)


class Ticketless:
    """A budget store written before tickets."""

    def __init__(self):
        self.inner = MemoryBudgets()

    def take(self, run, scope, *, limit, total, now, ttl):
        return self.inner.take(run, scope, limit=limit, total=total, now=now, ttl=ttl)

    def give_back(self, run, scope):
        self.inner.give_back(run, scope)

    def used(self, run, scope, *, now):
        return self.inner.used(run, scope, now=now)

    def forget(self, run):
        self.inner.forget(run)


class TicketBlind(Ticketless):
    """Takes ticket= and ignores it: a give-back sent twice returns two units."""

    def take(self, run, scope, *, limit, total, now, ttl, ticket=None):
        return self.inner.take(run, scope, limit=limit, total=total, now=now, ttl=ttl)

    def give_back(self, run, scope, *, ticket=None):
        self.inner.give_back(run, scope)


def idempotency(kind, **flags):
    fixture = pytest.fixture(lambda self: kind())
    return type(f"Test{kind.__name__}", (IdempotencyStoreContract,), {"store": fixture, **flags})


def budgets(kind, name, **flags):
    return type(name, (BudgetStoreContract,), {"store": pytest.fixture(lambda self: kind()), **flags})


TestUnowned = idempotency(Unowned)
TestUnownedOff = type("TestUnownedOff", (TestUnowned,), {"has_owners": False})
TestOwnerBlind = idempotency(OwnerBlind)
TestOwnerBlindOff = type("TestOwnerBlindOff", (TestOwnerBlind,), {"has_owners": False})
TestOwnersPerHandle = idempotency(OwnersPerHandle)


class TestOwnersPerHandleTwice(IdempotencyStoreContract):
    @pytest.fixture
    def store(self):
        return OwnersPerHandle()

    @pytest.fixture
    def peer(self, store):
        return OwnersPerHandle(store.inner)


TestTicketless = budgets(Ticketless, "TestTicketless")
TestTicketlessOff = budgets(Ticketless, "TestTicketlessOff", has_tickets=False)
TestTicketBlind = budgets(TicketBlind, "TestTicketBlind")
TestTicketBlindOff = budgets(TicketBlind, "TestTicketBlindOff", has_tickets=False)
TestKeepsAll = budgets(MemoryBudgets, "TestKeepsAll", kept_tickets=None)
TestKeepsMore = budgets(MemoryBudgets, "TestKeepsMore", kept_tickets=100)
'''

OWNER_CHECKS = {
    "test_a_lapsed_owners_release_frees_nothing_another_claimed",
    "test_a_lapsed_owners_finish_keeps_another_callers_claim",
    "test_finish_stores_when_no_one_else_holds_a_live_claim",
    "test_only_the_owner_renews_its_claim",
    "test_a_claim_without_owner_is_no_owners",
}
TICKET_CHECKS = {
    "test_a_give_back_sent_twice_returns_the_unit_once",
    "test_a_give_back_after_many_takes_returns_its_unit",
    "test_a_run_keeps_the_tickets_of_its_latest_give_backs",
    "test_a_give_back_that_emptied_its_run_sent_again_returns_nothing",
}
ASYNC_IDEMPOTENCY_CHECKS = {
    "test_async_twins_claim_replay_and_release",
    "test_async_twins_act_only_for_the_owner",
    "test_async_renewal_only_by_the_owner",
}
ASYNC_BUDGET_CHECKS = {"test_async_twins_count_and_give_back", "test_async_give_back_sent_twice_returns_the_unit_once"}
UNTAKE_CHECKS = {
    "test_a_take_sent_twice_counts_once",
    "test_untake_gives_back_a_counted_take_once",
    "test_an_untake_of_a_take_not_counted_returns_nothing",
    "test_take_tickets_under_threads",
    "test_async_untake",
}


def test_owner_and_ticket_checks_fail_a_store_that_ignores_them_and_switch_off_for_one_written_before(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_stores_inner=STORES)
    text = pytester.runpytest("-p", "no:cacheprovider", "-v").stdout.str()
    got = dict(re.findall(r"::(\w+::\w+) (PASSED|FAILED|SKIPPED)", text))

    def outcomes(suite: str) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for name, outcome in got.items():
            if name.startswith(suite + "::"):
                found.setdefault(outcome, set()).add(name.split("::")[1])
        return found

    # Written before owners: every owner check fails and says why, unless has_owners = False, which skips them.
    assert outcomes("TestUnowned")["FAILED"] == OWNER_CHECKS
    assert "Unowned has begin, renew, finish, release without owner=" in text and "or set has_owners = False" in text
    assert outcomes("TestUnownedOff").keys() == {"PASSED", "SKIPPED"}
    assert outcomes("TestUnownedOff")["SKIPPED"] == OWNER_CHECKS | ASYNC_IDEMPOTENCY_CHECKS  # and no async twins
    # Taking owner= and ignoring it: each check whose scenario it breaks fails; a finish that always stores is no harm alone.
    assert outcomes("TestOwnerBlind")["FAILED"] == OWNER_CHECKS - {"test_finish_stores_when_no_one_else_holds_a_live_claim"}
    assert outcomes("TestOwnerBlindOff")["FAILED"] == OWNER_CHECKS  # the plugin passes owner=: no switching off
    assert "OwnerBlind's methods take owner=, so the plugin passes it and relies on this check" in text
    # Owners kept by the handle that claimed: right through one handle, wrong through a peer's (another worker's).
    assert "FAILED" not in outcomes("TestOwnersPerHandle")
    assert outcomes("TestOwnersPerHandleTwice")["FAILED"] == {
        "test_a_lapsed_owners_release_frees_nothing_another_claimed",
        "test_a_lapsed_owners_finish_keeps_another_callers_claim",
        "test_only_the_owner_renews_its_claim",
        "test_a_claim_without_owner_is_no_owners",
    }
    assert outcomes("TestTicketless")["FAILED"] == TICKET_CHECKS
    assert "Ticketless has give_back without ticket=" in text
    assert outcomes("TestTicketlessOff")["SKIPPED"] == TICKET_CHECKS | ASYNC_BUDGET_CHECKS | UNTAKE_CHECKS
    assert "FAILED" not in outcomes("TestTicketlessOff")
    # Taking ticket= and ignoring it: a give-back sent again returns a second unit; one of a take long past is no harm alone.
    # (and one give-back sent 16 times at once returns 16 units)
    assert outcomes("TestTicketBlind")["FAILED"] == TICKET_CHECKS - {"test_a_give_back_after_many_takes_returns_its_unit"} | {
        "test_give_backs_under_threads"
    }
    assert outcomes("TestTicketBlindOff")["FAILED"] == TICKET_CHECKS
    # kept_tickets: the number of give-backs the store declares it remembers is checked (the memory store: 64, not 100).
    assert outcomes("TestKeepsMore")["FAILED"] == {"test_a_run_keeps_the_tickets_of_its_latest_give_backs"}
    assert (
        outcomes("TestKeepsAll")["SKIPPED"]
        == {"test_a_run_keeps_the_tickets_of_its_latest_give_backs"} | ASYNC_BUDGET_CHECKS | UNTAKE_CHECKS
    )
    assert "FAILED" not in outcomes("TestKeepsAll")
    summary = text.split("checks switched off, with nothing to check, or known to fail", 1)[1]
    for check in sorted(OWNER_CHECKS):
        assert f"TestUnownedOff: {check}: TestUnownedOff.has_owners = False (written before owners" in summary
    for check in sorted(TICKET_CHECKS):
        assert f"TestTicketlessOff: {check}: TestTicketlessOff.has_tickets = False (written before tickets" in summary
    assert "TestKeepsAll: test_a_run_keeps_the_tickets_of_its_latest_give_backs: TestKeepsAll.kept_tickets = None" in summary


ASYNC_STORES = '''
import threading

import pytest
from harness_one.state import MemoryBudgets, MemoryStore
from harness_one.testing import BudgetStoreContract, IdempotencyStoreContract


class Twins(MemoryStore):
    """Awaitable twins that do what the blocking methods do."""

    async def abegin(self, scope, key, fingerprint, now, lease, *, owner=None):
        return self.begin(scope, key, fingerprint, now, lease, owner=owner)

    async def arenew(self, scope, key, now, lease, *, owner=None):
        return self.renew(scope, key, now, lease, owner=owner)

    async def afinish(self, scope, key, record, *, owner=None, now=None):
        return self.finish(scope, key, record, owner=owner, now=now)

    async def arelease(self, scope, key, *, owner=None):
        self.release(scope, key, owner=owner)


class TwinsOwnerBlind(MemoryStore):
    """Right blocking methods, awaitable twins that take owner= and ignore it."""

    async def abegin(self, scope, key, fingerprint, now, lease, *, owner=None):
        return self.begin(scope, key, fingerprint, now, lease)

    async def arenew(self, scope, key, now, lease, *, owner=None):
        return self.renew(scope, key, now, lease)

    async def afinish(self, scope, key, record, *, owner=None, now=None):
        return self.finish(scope, key, record)

    async def arelease(self, scope, key, *, owner=None):
        self.release(scope, key)


class HalfTwins(MemoryStore):
    """abegin, so the plugins await afinish and arelease too, which it lacks."""

    async def abegin(self, scope, key, fingerprint, now, lease, *, owner=None):
        return self.begin(scope, key, fingerprint, now, lease, owner=owner)


class BudgetTwins(MemoryBudgets):
    async def atake(self, run, scope, *, limit, total, now, ttl):
        return self.take(run, scope, limit=limit, total=total, now=now, ttl=ttl)

    async def agive_back(self, run, scope, *, ticket=None):
        self.give_back(run, scope, ticket=ticket)


class BudgetTwinsTicketBlind(BudgetTwins):
    async def agive_back(self, run, scope, *, ticket=None):
        self.give_back(run, scope)


class Untakes(BudgetTwins):
    """Take tickets and untake, in memory, as the Redis store keeps them."""

    def __init__(self):
        super().__init__()
        self.held = {}  # (run, ticket): True while counted, False once untaken (or untaken before it came)
        self.guard = threading.Lock()

    def take(self, run, scope, *, limit, total, now, ttl, ticket=None):
        with self.guard:
            if (run, ticket) in self.held:
                return 0
            spent = super().take(run, scope, limit=limit, total=total, now=now, ttl=ttl)
            if ticket is not None and spent == 0:
                self.held[run, ticket] = True
            return spent

    async def atake(self, run, scope, *, limit, total, now, ttl, ticket=None):
        return self.take(run, scope, limit=limit, total=total, now=now, ttl=ttl, ticket=ticket)

    def untake(self, run, scope, *, ticket):
        with self.guard:
            if self.held.get((run, ticket)):
                self.give_back(run, scope)
            self.held[run, ticket] = False

    async def auntake(self, run, scope, *, ticket):
        self.untake(run, scope, ticket=ticket)


class UntakeBlind(BudgetTwins):
    """Takes ticket= and ignores it; untake gives a unit back whatever it was."""

    def take(self, run, scope, *, limit, total, now, ttl, ticket=None):
        return super().take(run, scope, limit=limit, total=total, now=now, ttl=ttl)

    async def atake(self, run, scope, *, limit, total, now, ttl, ticket=None):
        return self.take(run, scope, limit=limit, total=total, now=now, ttl=ttl)

    def untake(self, run, scope, *, ticket):
        self.give_back(run, scope)

    async def auntake(self, run, scope, *, ticket):
        self.untake(run, scope, ticket=ticket)


class HalfUntake(Untakes):
    """auntake, so the plugin sends untake too, which it lacks."""

    untake = None


class UntakeTicketless(BudgetTwins):
    """untake, but takes without ticket=, which the plugin then passes."""

    def untake(self, run, scope, *, ticket):
        pass

    async def auntake(self, run, scope, *, ticket):
        pass


def suite(kind, contract):
    return type(f"Test{kind.__name__}", (contract,), {"store": pytest.fixture(lambda self: kind())})


TestMemoryStore = suite(MemoryStore, IdempotencyStoreContract)
TestTwins = suite(Twins, IdempotencyStoreContract)
TestTwinsOwnerBlind = suite(TwinsOwnerBlind, IdempotencyStoreContract)
TestHalfTwins = suite(HalfTwins, IdempotencyStoreContract)
TestMemoryBudgets = suite(MemoryBudgets, BudgetStoreContract)
TestBudgetTwins = suite(BudgetTwins, BudgetStoreContract)
TestBudgetTwinsTicketBlind = suite(BudgetTwinsTicketBlind, BudgetStoreContract)
TestUntakes = suite(Untakes, BudgetStoreContract)
TestUntakeBlind = suite(UntakeBlind, BudgetStoreContract)
TestHalfUntake = suite(HalfUntake, BudgetStoreContract)
TestUntakeTicketless = suite(UntakeTicketless, BudgetStoreContract)
'''


def test_async_checks_run_through_the_twins_and_skip_a_store_without_them(pytester: pytest.Pytester) -> None:
    """The owners and tickets of the awaitable twins are checked: twins that ignore them fail, though every
    blocking check passes; a store without twins skips those checks, saying why; a store with some fails."""
    pytester.makepyfile(test_async_stores_inner=ASYNC_STORES)
    text = pytester.runpytest("-p", "no:cacheprovider", "-v").stdout.str()
    got = dict(re.findall(r"::(\w+::\w+) (PASSED|FAILED|SKIPPED)", text))

    def named(suite: str, outcome: str) -> set[str]:
        return {name.split("::")[1] for name, found in got.items() if name.startswith(suite + "::") and found == outcome}

    assert named("TestMemoryStore", "SKIPPED") == ASYNC_IDEMPOTENCY_CHECKS and not named("TestMemoryStore", "FAILED")
    assert named("TestMemoryBudgets", "SKIPPED") == ASYNC_BUDGET_CHECKS | UNTAKE_CHECKS and not named(
        "TestMemoryBudgets", "FAILED"
    )
    summary = text.split("checks switched off, with nothing to check, or known to fail", 1)[1]
    assert "TestMemoryStore: test_async_twins_act_only_for_the_owner: MemoryStore has no abegin (no async twins" in summary
    assert "TestMemoryBudgets: test_async_twins_count_and_give_back: MemoryBudgets has no atake (no async twins" in summary
    assert named("TestTwins", "PASSED") >= ASYNC_IDEMPOTENCY_CHECKS and not named("TestTwins", "FAILED")
    assert named("TestBudgetTwins", "PASSED") >= ASYNC_BUDGET_CHECKS and not named("TestBudgetTwins", "FAILED")
    assert named("TestTwinsOwnerBlind", "FAILED") == ASYNC_IDEMPOTENCY_CHECKS - {"test_async_twins_claim_replay_and_release"}
    assert named("TestTwinsOwnerBlind", "PASSED") >= OWNER_CHECKS  # its blocking methods keep owners
    assert named("TestHalfTwins", "FAILED") == ASYNC_IDEMPOTENCY_CHECKS
    assert "HalfTwins has abegin but not afinish, arelease: the plugins await all of abegin, afinish, arelease" in text
    assert named("TestBudgetTwinsTicketBlind", "FAILED") == {"test_async_give_back_sent_twice_returns_the_unit_once"}
    assert named("TestBudgetTwinsTicketBlind", "PASSED") >= TICKET_CHECKS


def test_untake_checks_fail_a_store_that_ignores_take_tickets_and_skip_a_store_without_auntake(
    pytester: pytest.Pytester,
) -> None:
    """A store with ``auntake`` is checked for take tickets and ``untake`` (the plugin passes them to it): one
    that keeps them passes; one that ignores them fails every such check; one that lacks ``untake``, or whose
    takes refuse ``ticket=``, fails them saying what it lacks; a store without ``auntake`` skips them."""
    pytester.makepyfile(test_untake_stores_inner=ASYNC_STORES)
    text = pytester.runpytest("-p", "no:cacheprovider", "-v", "-k", "Untake or TestBudgetTwins").stdout.str()
    got = dict(re.findall(r"::(\w+::\w+) (PASSED|FAILED|SKIPPED)", text))

    def named(suite: str, outcome: str) -> set[str]:
        return {name.split("::")[1] for name, found in got.items() if name.startswith(suite + "::") and found == outcome}

    assert named("TestUntakes", "PASSED") >= UNTAKE_CHECKS | ASYNC_BUDGET_CHECKS and not named("TestUntakes", "FAILED")
    assert named("TestUntakes", "SKIPPED") == set()
    assert named("TestUntakeBlind", "FAILED") == UNTAKE_CHECKS
    assert named("TestHalfUntake", "FAILED") == UNTAKE_CHECKS
    assert "HalfUntake has auntake but not untake: the plugin calls all of auntake, untake, atake" in text
    assert named("TestUntakeTicketless", "FAILED") == UNTAKE_CHECKS
    assert "UntakeTicketless has auntake, so the plugin passes ticket= to take, atake, which does not take it" in text
    assert named("TestBudgetTwins", "SKIPPED") == UNTAKE_CHECKS
    summary = text.split("checks switched off, with nothing to check, or known to fail", 1)[1]
    assert "TestBudgetTwins: test_async_untake: BudgetTwins has no auntake (takes without tickets" in summary
