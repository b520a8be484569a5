"""The cache keeps a call whose arguments hold one list twice; an error names the instance of a plugin class that failed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from harness_one import Call, ManualClock, PluginError, ToolRegistry, hookimpl, log_gated, per_tool
from harness_one_plugins import LoggingPlugin

# ------------------------------------------------------------------ cache: a list or dict in the arguments twice


def cached_registry() -> tuple[ToolRegistry, list[Any]]:
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugin_options={"cache": {"ttl": 600}})
    runs: list[Any] = []

    def look(a: Any, b: Any) -> str:
        """Look."""
        runs.append(a)
        return "seen"

    reg.add(look, read_only=True)
    return reg, runs


def test_arguments_holding_one_list_or_dict_twice_are_cached() -> None:
    """``{"a": shared, "b": shared}`` ran the tool on every call: the plain-JSON check took a repeat for a cycle."""
    reg, runs = cached_registry()
    shared_list, shared_dict = [1, 2], {"k": [3]}
    for arguments in ({"a": shared_list, "b": shared_list}, {"a": shared_dict, "b": [shared_dict, shared_dict]}):
        assert [reg.try_call("look", arguments).ran for _ in range(2)] == [True, False]
    assert reg.try_call("look", {"a": [1, 2], "b": [1, 2]}).ran is False  # the same JSON: the same key
    assert len(runs) == 2
    assert reg.stats()["cache"] == {"hits": 3, "misses": 2, "uncached": 0, "entries": 2}


def test_a_result_holding_one_list_twice_is_cached_and_copied_as_it_is() -> None:
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugin_options={"cache": {"ttl": 600}})
    part = {"rows": [1, 2]}
    reg.add(lambda: {"first": part, "again": part}, name="load", description="Load.", read_only=True)
    assert reg.try_call("load").ran and not (hit := reg.try_call("load")).ran
    assert hit.value == {"first": part, "again": part} and hit.value["first"] is not part
    assert reg.stats()["cache"]["entries"] == 1


def context_registry() -> ToolRegistry:
    reg = ToolRegistry(autoload=False, clock=ManualClock(), plugin_options={"cache": {"ttl": 600}})

    def orders(call: Call) -> str:
        """Orders of who asks."""
        return "orders"

    reg.add(orders, read_only=True)
    return reg


def test_a_cycle_in_what_is_compared_is_not_cached() -> None:
    """(Arguments nested past 64 levels, as a cycle's are, are the core's refusal.) A cycle in a read context: uncached."""
    reg = context_registry()
    loop: list[Any] = [1]
    loop.append(loop)
    inner: dict[str, Any] = {}
    inner["self"] = {"up": inner}
    for context in ({"who": loop}, {"who": [inner], "again": inner}):
        assert [reg.try_call("orders", context=context).ran for _ in range(2)] == [True, True]
    assert reg.stats()["cache"] == {"hits": 0, "misses": 0, "uncached": 4, "entries": 0}


def test_repeats_whose_json_would_be_huge_are_not_cached() -> None:
    """Past 500,000 items written out, repeats counted (1,000,000 here, from 1,000 distinct ones), no key is made:
    a "billion laughs" would take for ever to write. (Arguments that large are the core's refusal.)"""
    reg = context_registry()
    part = list(range(1000))
    assert [reg.try_call("orders", context={"who": [part] * 1000}).ran for _ in range(2)] == [True, True]
    assert [reg.try_call("orders", context={"who": [part] * 400}).ran for _ in range(2)] == [True, False]
    assert reg.stats()["cache"] == {"hits": 1, "misses": 1, "uncached": 2, "entries": 1}


# ------------------------------------------------------------------ plugin errors: two instances of one class


class Picky:
    """One class, registered twice: only the instance made with ``fail`` raises."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        if self.fail:
            raise RuntimeError("boom")


class PickyPerTool:
    """As :class:`Picky`, through functions ``per_tool`` prepares (one code for both instances' closures)."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def prepare(self, tool: Any) -> Callable[[Call], None]:
        plugin = self

        def check(call: Call) -> None:
            if plugin.fail:
                raise RuntimeError("boom")

        return check

    @hookimpl
    @per_tool(lambda plugin, tool: plugin.prepare(tool))
    def harness_pre_call(self, call: Call) -> None:
        self.prepare(call.tool)(call)


class WrongAnswer:
    """As :class:`PickyPerTool`, but the failing instance answers what a post_call hook may not (a string)."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def prepare(self, tool: Any) -> Callable[[Call], Any]:
        answer = "not None" if self.fail else None
        return lambda call: answer

    @hookimpl
    @per_tool(lambda plugin, tool: plugin.prepare(tool))
    def harness_post_call(self, call: Call) -> Any:
        return self.prepare(call.tool)(call)


@pytest.mark.parametrize("kind", [Picky, PickyPerTool, WrongAnswer], ids=["method", "per_tool", "bad answer"])
@pytest.mark.parametrize("failing", ["a", "b"])
def test_the_error_names_the_instance_that_failed(kind: Any, failing: str) -> None:
    """Two instances of one class as "a" and "b": the one that failed was named by its code, so maybe as the other."""
    reg = ToolRegistry(autoload=False)
    reg.plugins.register(kind(failing == "a"), "a")
    reg.plugins.register(kind(failing == "b"), "b")
    reg.add(lambda: 1, name="one", description="One.")
    error = reg.try_call("one").error
    assert isinstance(error, PluginError) and error.plugin == failing, error
    assert f"plugin '{failing}'" in str(error)


class _Audit:
    """A plugin whose per-tool function is :func:`log_gated`'s, whose code the logging plugin's run too."""

    def __init__(self) -> None:
        self._post = log_gated("test.audit", logging.CRITICAL, self._emit)

    def _emit(self, call: Call) -> None:
        raise RuntimeError("boom")

    @hookimpl
    @per_tool(lambda plugin, tool: plugin._post)
    def harness_post_call(self, call: Call) -> None:
        self._post(call)


@pytest.mark.parametrize("audit_first", [True, False])
def test_a_plugin_built_on_log_gated_is_named_beside_the_logging_plugin(audit_first: bool) -> None:
    """``gated``'s frame holds the plugin only as its bound ``emit``: found by its ``__self__`` (it named no plugin)."""
    logging.getLogger("test.audit").setLevel(logging.CRITICAL)
    reg = ToolRegistry(autoload=False, standard_plugins=False)
    named: list[tuple[Any, str]] = [(_Audit(), "audit"), (LoggingPlugin(), "logging")]
    for plugin, name in named if audit_first else named[::-1]:
        reg.plugins.register(plugin, name)
    reg.add(lambda: 1, name="one", description="One.")
    err = reg.try_call("one").error
    assert isinstance(err, PluginError) and err.plugin == "audit", err


class _AttrDict(dict[str, Any]):
    __getattr__ = dict.__getitem__  # the "attribute dict" recipe: a missing attribute is a KeyError


def _post_with_an_attr_dict(call: Call) -> None:
    settings = _AttrDict(limit=1)
    raise RuntimeError(f"boom {settings.limit}")


class _Shared:
    @hookimpl
    @per_tool(lambda plugin, tool: _post_with_an_attr_dict)
    def harness_post_call(self, call: Call) -> None: ...


def test_a_shared_frame_holding_an_attribute_dict_still_gives_the_plugins_error() -> None:
    """Only a bound method's ``__self__`` is read: an ``AttrDict`` local's ``__getattr__`` raised KeyError there."""
    reg = ToolRegistry(autoload=False, standard_plugins=False)
    reg.plugins.register(_Shared(), "a1")
    reg.plugins.register(_Shared(), "a2")
    reg.add(lambda: 1, name="one", description="One.")
    err = reg.try_call("one").error
    assert isinstance(err, PluginError) and "RuntimeError: boom 1" in err.message, err
