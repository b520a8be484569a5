"""The in-memory idempotency store is bounded: oldest finished records dropped first, never a running claim."""

from __future__ import annotations

import pytest

from harness_one import PluginError, ToolRegistry
from harness_one.state import MemoryStore, Record
from harness_one_plugins import IdempotencyPlugin
from harness_one_plugins.idempotency import OutcomeNotReplayable

NOW, LEASE, TTL = 1000.0, 60.0, 3600.0


def claim(store: MemoryStore, key: str) -> Record | None:
    return store.begin("t", key, "fp", NOW, LEASE, owner=f"o-{key}")


def done(store: MemoryStore, key: str, value: object = "v", *, error: dict[str, object] | None = None) -> None:
    assert claim(store, key) is None
    kept = Record("fp", "done", NOW + TTL, ok=error is None, value=value, error=error)
    assert store.finish("t", key, kept, owner=f"o-{key}", now=NOW) is True


def test_past_max_records_the_oldest_finished_record_is_dropped_and_its_key_runs_again() -> None:
    store = MemoryStore(max_records=2)
    for key in ("k1", "k2", "k3"):
        done(store, key, f"value of {key}")
    assert store.evicted == 1 and len(store) == 2
    assert claim(store, "k1") is None  # dropped: the key is free, its call runs again
    kept = claim(store, "k3")
    assert kept is not None and kept.state == "done" and kept.value == "value of k3"


def test_a_running_claim_is_never_dropped_and_not_counted() -> None:
    store = MemoryStore(max_records=1, max_chars=10)
    assert claim(store, "running") is None
    for key in ("k1", "k2", "k3"):
        done(store, key, "0123456789")
    held = store.begin("t", "running", "fp", NOW, LEASE, owner="someone else")
    assert held is not None and held.state == "running"
    assert store.evicted == 2 and len(store) == 2  # the claim and the newest record


def test_past_max_chars_the_oldest_finished_records_are_dropped_as_the_cache_measures_results() -> None:
    store = MemoryStore(max_chars=100)
    done(store, "text", "x" * 40)  # a string: its length
    done(store, "data", {"rows": ["y" * 20]})  # anything else: its JSON, {"rows": ["yyy..."]} = 34 characters
    done(store, "error", None, error={"kind": "tool_error", "message": "z" * 10})  # 42 characters of JSON
    assert store.evicted == 1 and claim(store, "text") is None
    kept = claim(store, "data")
    assert kept is not None and kept.value == {"rows": ["y" * 20]}
    kept = claim(store, "error")
    assert kept is not None and kept.error == {"kind": "tool_error", "message": "z" * 10}


def test_an_outcome_finished_again_is_counted_once() -> None:
    store = MemoryStore(max_chars=100)
    done(store, "k1", "a" * 60)
    again = Record("fp", "done", NOW + TTL, ok=True, value="b" * 60)  # its owner's finish sent again, as the plugin
    assert store.finish("t", "k1", again, owner="o-k1", now=NOW) is True  # does after a cancellation: one record
    done(store, "k2", "c" * 30)
    assert store.evicted == 0
    kept = claim(store, "k1")
    assert kept is not None and kept.value == "b" * 60


def test_an_expired_or_released_record_frees_its_characters() -> None:
    store = MemoryStore(max_chars=100)
    done(store, "old", "a" * 60)
    assert store.begin("t", "old", "fp", NOW + TTL, LEASE, owner="next") is None  # expired: claimed anew
    store.release("t", "old", owner="next")
    done(store, "k2", "c" * 50)
    done(store, "k3", "d" * 40)
    assert store.evicted == 0 and len(store) == 2


def test_an_outcome_larger_than_max_chars_alone_is_refused_as_not_storable() -> None:
    store = MemoryStore(max_chars=100)
    done(store, "small", "s")
    assert claim(store, "big") is None
    with pytest.raises(ValueError) as raised:
        store.finish("t", "big", Record("fp", "done", NOW + TTL, ok=True, value="x" * 101), owner="o-big", now=NOW)
    assert str(raised.value) == "the outcome is 101 characters, over the 100 the store holds"
    kept = claim(store, "small")
    assert store.evicted == 0 and kept is not None and kept.value == "s"


def test_lowering_the_bounds_drops_the_oldest_now() -> None:
    store = MemoryStore()
    for key in ("k1", "k2", "k3"):
        done(store, key)
    store.bound(max_records=1)
    assert (store.max_records, store.max_chars, store.evicted, len(store)) == (1, 100_000_000, 2, 1)


@pytest.mark.parametrize("option", ["max_records", "max_chars"])
@pytest.mark.parametrize("value", [0, -1, "10", 2.5, True])
def test_the_bounds_must_be_positive_integers(option: str, value: object) -> None:
    with pytest.raises(ValueError) as raised:
        MemoryStore(**{option: value})  # type: ignore[arg-type]
    assert str(raised.value) == f"MemoryStore {option} must be a positive integer, not {value!r}"
    with pytest.raises(ValueError) as raised:
        IdempotencyPlugin(**{option: value})  # type: ignore[arg-type]
    assert str(raised.value) == f"idempotency {option} must be a positive integer or None, not {value!r}"
    with pytest.raises(PluginError) as built:
        ToolRegistry(autoload=False, plugin_options={"idempotency": {option: value}})
    assert f"cannot be built with its options ['{option}']" in built.value.message


def test_the_plugin_bounds_the_registry_s_in_memory_store_and_counts_what_it_dropped() -> None:
    reg = ToolRegistry(autoload=False, plugin_options={"idempotency": {"max_records": 2, "max_chars": 250}})
    runs: list[int] = []

    def page(n: int) -> str:
        runs.append(n)
        return "x" * 100

    reg.add(page, idempotent=True)
    plugin = reg.plugins.get("idempotency")
    assert isinstance(plugin, IdempotencyPlugin) and isinstance(plugin.store, MemoryStore)
    assert (plugin.store.max_records, plugin.store.max_chars) == (2, 250)
    for n in range(3):
        reg.call("page", {"n": n}, idempotency_key=f"k{n}")
    assert reg.call("page", {"n": 2}, idempotency_key="k2") == "x" * 100 and runs == [0, 1, 2]  # replayed
    assert reg.call("page", {"n": 0}, idempotency_key="k0") == "x" * 100 and runs == [0, 1, 2, 0]  # dropped: ran again
    assert reg.stats()["idempotency"]["evicted"] == 2


def test_without_options_the_plugin_keeps_the_store_s_own_bounds() -> None:
    store = MemoryStore(max_records=5)
    plugin = IdempotencyPlugin(store=store)
    assert (plugin.max_records, plugin.max_chars, store.max_records, store.max_chars) == (None, None, 5, 100_000_000)
    assert "evicted" not in ToolRegistry(autoload=False).stats()["idempotency"]


def test_an_outcome_larger_than_the_store_holds_is_kept_as_not_replayable_and_never_runs_again() -> None:
    reg = ToolRegistry(autoload=False, plugin_options={"idempotency": {"max_chars": 50}})
    runs: list[int] = []

    def page(n: int) -> str:
        runs.append(n)
        return "x" * 51

    reg.add(page, idempotent=True)
    assert reg.call("page", {"n": 1}, idempotency_key="k") == "x" * 51
    again = reg.try_call("page", {"n": 1}, idempotency_key="k").error
    assert isinstance(again, OutcomeNotReplayable) and again.replayed
    assert "already ran for idempotency key 'k'," in again.message and runs == [1]


@pytest.mark.parametrize("option", ["lease", "poll"])
def test_a_lease_or_poll_under_a_millisecond_is_refused(option: str) -> None:
    with pytest.raises(ValueError) as raised:
        IdempotencyPlugin(**{option: 1e-9})  # type: ignore[arg-type]
    assert str(raised.value) == f"idempotency {option} must be at least 0.001 seconds, not 1e-09"
    assert getattr(IdempotencyPlugin(**{option: 0.001}), option) == 0.001  # type: ignore[arg-type]


def test_an_error_larger_than_max_chars_is_kept_and_pushes_out_the_older_records() -> None:
    store = MemoryStore(max_chars=20)
    done(store, "small", "s")
    done(store, "failed", None, error={"kind": "tool_error", "message": "z" * 30})
    kept = claim(store, "failed")
    assert kept is not None and kept.error == {"kind": "tool_error", "message": "z" * 30}
    assert store.evicted == 1 and claim(store, "small") is None
