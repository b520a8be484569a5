"""Tool-package discovery and threads: a package's import runs without the registry's lock.

The packages here reach the registry being loaded as the default registry. A deadlock fails
the test: each scenario runs in a daemon thread, waited for within a bound.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as NotYet
from typing import Any, TypeVar

import pytest

import harness_one._registry
from harness_one import PluginError, ToolNotFound, ToolRegistry, hookimpl
from harness_one._entrypoints import set_import_timeout

T = TypeVar("T")
#: Seconds a scenario may take before it counts as a deadlock.
BOUND = 20.0

TOOLS = """
from harness_one import defineTool

@defineTool(registry=None)
def shout(text: str) -> str:
    return text.upper()

@defineTool(registry=None)
def whisper(text: str) -> str:
    return text.lower()
"""

#: A package whose import starts a thread that does ``ACTION`` on the registry, and waits for it.
IN_A_THREAD = (
    TOOLS
    + """
import threading
from harness_one import ToolRegistry

seen = []

def _act():
    registry = ToolRegistry.default()
    try:
        seen.append(ACTION)
    except Exception as exc:
        seen.append(exc)

_helper = threading.Thread(target=_act)
_helper.start()
_helper.join()
"""
)

#: How discovery starts: a call of the package's tool (only its package loads), or a listing (every package).
STARTS: dict[str, Callable[[ToolRegistry], Any]] = {
    "call": lambda reg: reg.call("shout", {"text": "hi"}),
    "listing": lambda reg: reg.names(),
}


def _within(seconds: float, fn: Callable[[], T]) -> T:
    """``fn()`` run in a daemon thread: its result, or a failure if it has not returned within ``seconds``."""
    done: Future[T] = Future()

    def run() -> None:
        try:
            done.set_result(fn())
        except BaseException as exc:
            done.set_exception(exc)

    threading.Thread(target=run, name="scenario", daemon=True).start()
    try:
        return done.result(seconds)
    except NotYet:
        pytest.fail(f"still running after {seconds:g} s: a deadlock")


@pytest.fixture
def reg() -> Iterator[ToolRegistry]:
    """A discovering registry installed as the default (what the packages' imports reach)."""
    registry = ToolRegistry(discover=True, autoload=False)
    old = ToolRegistry.set_default(registry)
    try:
        yield registry
    finally:
        ToolRegistry.set_default(old)


@pytest.fixture
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short ``_DISCOVERY_WAIT``: a lookup that must give up does so quickly."""
    monkeypatch.setattr(harness_one._registry, "_DISCOVERY_WAIT", 0.2)


def _package(dists: Any, module: str, source: str, *, named: bool = False) -> str:
    """A tool package of module ``module`` (one entry point, or one per tool when ``named``); its distribution."""
    dist = module.replace("_", "-")
    eps = {"shout": f"{module}:shout", "whisper": f"{module}:whisper"} if named else {"text": module}
    dists.make(dist, {module: source}, {"harness_one.tools": eps})
    return dist


#: What the thread does: what it appends to seen, and what it must append.
ACTIONS = {
    "add": ("registry.add(lambda: 'pong', name='hx_ping').name", "hx_ping"),
    "remove": ("registry.remove('hx_known').name", "hx_known"),
    "call": ("registry.call('hx_known')", "known"),  # a registered name: never waited for discovery
    "plugin": ("registry.plugins.register(type('Quiet', (), {})(), 'quiet')", "quiet"),
}


@pytest.mark.parametrize("start", sorted(STARTS))
@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_a_thread_the_import_waits_for_changes_the_registry(dists: Any, reg: ToolRegistry, start: str, action: str) -> None:
    """The import held the registry's lock: the thread waited for it, the import for the thread, for ever."""
    reg.add(lambda: "known", name="hx_known")
    module = f"hx_changes_{start}_{action}"
    code, expected = ACTIONS[action]
    _package(dists, module, IN_A_THREAD.replace("ACTION", code))
    _within(BOUND, lambda: STARTS[start](reg))
    assert sys.modules[module].seen == [expected]
    assert reg.call("shout", {"text": "ok"}) == "OK" and "whisper" in reg.names()
    assert ("hx_ping" in reg.names()) is (action == "add") and ("hx_known" in reg.names()) is (action != "remove")


@pytest.mark.parametrize("start", sorted(STARTS))
def test_a_thread_the_import_waits_for_gets_a_clear_error_for_the_package_s_tool(
    dists: Any, reg: ToolRegistry, short_wait: None, start: str
) -> None:
    """Its own tools exist only once the import returns, which waits for the thread: the lookup
    gives up after ``_DISCOVERY_WAIT`` with a ToolNotFound that says why."""
    module = f"hx_looks_{start}"
    _package(dists, module, IN_A_THREAD.replace("ACTION", "registry.get('whisper')"))
    _within(BOUND, lambda: STARTS[start](reg))
    (error,) = sys.modules[module].seen
    assert isinstance(error, ToolNotFound)
    assert "tool packages were still loading in another thread after 0.2 s" in str(error)
    assert reg.get("whisper").source == module.replace("_", "-")  # loaded once the thread gave up


def test_a_thread_the_import_waits_for_cannot_load_every_package(dists: Any, reg: ToolRegistry, short_wait: None) -> None:
    """``load_entry_points`` there raises TimeoutError after the bound; it waited for ever."""
    module = "hx_loads_all"
    _package(dists, module, IN_A_THREAD.replace("ACTION", "registry.load_entry_points()"))
    _within(BOUND, lambda: reg.call("shout", {"text": "hi"}))
    (error,) = sys.modules[module].seen
    assert isinstance(error, TimeoutError) and "another thread is loading the tool packages" in str(error)


def test_an_import_bounded_by_the_cli_can_add_a_tool(dists: Any, reg: ToolRegistry) -> None:
    """Under ``HARNESS_ONE_IMPORT_TIMEOUT`` the import runs in a helper thread while the caller
    waits: a tool it added to the registry waited for the caller's lock until ImportTimeout."""
    module = "hx_bounded_add"
    source = TOOLS + "\nfrom harness_one import ToolRegistry\nToolRegistry.default().add(lambda: 'pong', name='hx_ping')\n"
    _package(dists, module, source)
    set_import_timeout(10)
    try:
        assert _within(BOUND, lambda: reg.call("shout", {"text": "hi"})) == "HI"
    finally:
        set_import_timeout(None)
    assert reg.discovery.failures == [] and reg.call("hx_ping") == "pong"


@pytest.mark.parametrize("named", [False, True], ids=["module", "named"])
def test_concurrent_first_calls_load_the_package_once(dists: Any, reg: ToolRegistry, named: bool) -> None:
    """A second thread asking for a tool of the package being imported waits for it and gets it."""
    gate = types.ModuleType("hx_gate")
    gate.entered, gate.go = threading.Event(), threading.Event()  # type: ignore[attr-defined]
    sys.modules["hx_gate"] = gate
    added: list[str] = []

    class Counting:
        @hookimpl
        def harness_tool_added(self, tool: Any) -> None:
            added.append(tool.name)

    reg.plugins.register(Counting(), "counting")
    source = "import hx_gate\nhx_gate.entered.set()\nhx_gate.go.wait(10)\n" + TOOLS
    dist = _package(dists, f"hx_gated_{'named' if named else 'module'}", source, named=named)
    try:
        answers: dict[str, Any] = {}
        first = threading.Thread(target=lambda: answers.update(shout=reg.call("shout", {"text": "a"})))
        first.start()
        assert gate.entered.wait(BOUND)  # type: ignore[attr-defined]
        second = threading.Thread(target=lambda: answers.update(whisper=reg.call("whisper", {"text": "B"})))
        second.start()
        second.join(0.2)
        assert second.is_alive()  # waiting for the import (it cannot have the tool before)
        gate.go.set()  # type: ignore[attr-defined]
        first.join(BOUND)
        second.join(BOUND)
    finally:
        gate.go.set()  # type: ignore[attr-defined]
        del sys.modules["hx_gate"]
    assert answers == {"shout": "A", "whisper": "b"}
    assert sorted(reg.discovery.loaded[dist]) == ["shout", "whisper"] and reg.discovery.conflicts == []
    assert sorted(n for n in added if n in ("shout", "whisper")) == ["shout", "whisper"]  # each told once


def test_an_import_that_looks_up_another_package_s_tool_loads_it(dists: Any, reg: ToolRegistry) -> None:
    """The importing thread itself may use the registry: it loads the other package there (no wait)."""
    _package(dists, "hx_base", TOOLS, named=True)
    user = "from harness_one import ToolRegistry, defineTool\n\nBASE = ToolRegistry.default().get('shout')\n\n"
    user += "@defineTool(registry=None)\ndef louder(text: str) -> str:\n    return BASE.fn(text) + '!'\n"
    dists.make("hx-user", {"hx_user": user}, {"harness_one.tools": {"louder": "hx_user:louder"}})
    assert _within(BOUND, lambda: reg.call("louder", {"text": "hi"})) == "HI!"
    assert reg.get("shout").source == "hx-base" and reg.discovery.failures == []


def test_an_export_made_while_packages_still_load_is_not_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    """An export built from a listing that gave up waiting stayed cached without the packages' tools."""
    reg = ToolRegistry(autoload=False)
    reg.add(lambda: 1, name="one")
    monkeypatch.setattr(reg, "_ensure_discovered", lambda name=None: False)  # another thread still loading
    partial = reg.export("openai", copy=False)
    assert [t["function"]["name"] for t in partial.tools] == ["one"]
    monkeypatch.setattr(reg, "_ensure_discovered", lambda name=None: True)
    assert reg.export("openai", copy=False) is not partial  # built again once loading is done
    assert reg.export("openai", copy=False) is reg.export("openai", copy=False)  # and cached then


#: A plugin whose import starts a thread that asks for the default registry, and waits for it.
PLUGIN_WAITING_FOR_A_THREAD = """
import threading
from harness_one import ToolRegistry

seen = []

def _ask():
    for ask in (ToolRegistry.default, lambda: ToolRegistry.set_default(ToolRegistry(autoload=False))):
        try:
            seen.append(ask())
        except Exception as exc:
            seen.append(exc)

_helper = threading.Thread(target=_ask)
_helper.start()
_helper.join()

class Quiet:
    pass

def plugin():
    return Quiet()
"""


def test_a_thread_a_plugin_import_waits_for_gets_a_clear_error_from_the_default_registry(dists: Any, short_wait: None) -> None:
    """The default registry was built under its lock, held through its plugins' imports: a thread
    that an import waited for waited for that lock for ever (to get or to replace the default).
    It waits ``_DISCOVERY_WAIT`` now."""
    dists.make(
        "hx-waits-plugin",
        {"hx_waits_plugin": PLUGIN_WAITING_FOR_A_THREAD},
        {"harness_one.plugins": {"hx_waits": "hx_waits_plugin:plugin"}},
    )
    old = ToolRegistry.set_default(None)
    try:
        registry = _within(BOUND, ToolRegistry.default)
        assert "hx_waits" in registry.plugins.names()
        answers = sys.modules["hx_waits_plugin"].seen
        assert len(answers) == 2 and all(isinstance(answer, PluginError) for answer in answers)  # default(), set_default()
        assert all("being set up in another thread" in str(answer) and "0.2 s" in str(answer) for answer in answers)
        assert ToolRegistry.default() is registry  # the lock was released: later callers get it at once
    finally:
        ToolRegistry.set_default(old)


def test_harness_ones_own_plugins_are_never_given_up_on_at_the_import_bound() -> None:
    """Under a bound too short for any import, the standard plugins were ImportTimeouts, and the calls went on
    without validation, rate limits or timeouts (fail open). In a fresh process: none of their modules imported yet."""
    import subprocess

    script = (
        "from harness_one._entrypoints import set_import_timeout\n"
        "from harness_one import ToolRegistry\n"
        "set_import_timeout(1e-9)\n"
        "r = ToolRegistry()\n"
        "print(sorted(r.plugins.names()))\n"
        "print(len(r.plugins.failures))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    names, failures = done.stdout.splitlines()
    for standard in ("validation", "rate_limit", "timeout", "approval", "concurrency", "circuit_breaker"):
        assert f"'{standard}'" in names
    assert failures == "0", done.stderr
