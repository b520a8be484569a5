"""The registry: independence, listing, calling styles, concurrency and counters."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
import tools_for_processes as tfp
from fork_support import in_child

from harness_one import (
    Call,
    CallResult,
    PluginError,
    RateLimitExceeded,
    ToolArgumentError,
    ToolError,
    ToolExecutionError,
    ToolNotFound,
    ToolRegistry,
    define_tool,
    hookimpl,
)


def test_instances_are_independent(registry: ToolRegistry, clock: object) -> None:
    other = ToolRegistry(autoload=False)

    @define_tool(registry=registry, rate_limit={"rate": 1, "burst": 1})
    def ping() -> str:
        return "pong"

    other.add(ping)
    assert registry.call("ping") == "pong"
    assert other.call("ping") == "pong"  # its own bucket: not limited by the first registry's call
    assert "ping" not in ToolRegistry.default().names() or ToolRegistry.default().get("ping") is not ping.tool  # type: ignore[attr-defined]
    assert registry.plugins.get("rate_limit") is not other.plugins.get("rate_limit")


def test_list_tools_forms(registry: ToolRegistry) -> None:
    @define_tool(registry=registry)
    def a(x: int) -> int:
        """A."""
        return x

    @define_tool(registry=registry)
    def b() -> None:
        """B."""

    assert registry.names() == ["a", "b"] == registry.list_tools(names_only=True) == list(registry.list_tools())
    assert registry.list_tools()["a"]["description"] == "A."
    assert registry.list_tools()["a"]["parameters"]["properties"] == {"x": {"type": "integer"}}


def test_not_found_suggests(registry: ToolRegistry) -> None:
    @define_tool(registry=registry)
    def web_search(q: str) -> str:
        return q

    with pytest.raises(ToolNotFound) as err:
        registry.call("web_serch", {})
    assert err.value.suggestions == ["web_search"]
    assert "Did you mean: 'web_search'?" in str(err.value)
    result = registry.try_call("zzz", {})
    assert not result.ok and isinstance(result.error, ToolNotFound) and result.call_id


def test_try_call_result(registry: ToolRegistry) -> None:
    @define_tool(registry=registry)
    def div(a: float, b: float) -> float:
        return a / b

    good = registry.try_call("div", {"a": 1, "b": 4}, call_id="c-1")
    assert good == CallResult(True, 0.25, None, "div", "c-1", good.duration, 1, True)
    assert good.to_dict() == {"ok": True, "result": 0.25, "call_id": "c-1"}
    assert good.for_model() == "0.25"
    bad = registry.try_call("div", {"a": 1, "b": 0})
    assert not bad.ok and isinstance(bad.error, ToolExecutionError) and bad.ran
    assert isinstance(bad.error.__cause__, ZeroDivisionError)
    assert bad.for_model() == "Error: Tool 'div' failed: ZeroDivisionError: division by zero"
    assert bad.to_dict()["error"]["type"] == "ToolExecutionError" and bad.to_dict()["error"]["cause"] == "ZeroDivisionError"
    wrong = registry.try_call("div", {"a": "x", "b": 1})
    assert wrong.to_dict()["error"]["problems"][0]["path"] == "$.a"


def test_bad_input_shapes(registry: ToolRegistry) -> None:
    @define_tool(registry=registry)
    def echo(x: int = 0) -> int:
        return x

    assert registry.call("echo", None) == 0
    assert registry.call("echo", "") == 0
    assert registry.call("echo", b'{"x": 2}') == 2
    for raw, fragment in [
        ('{"x": ', "not valid JSON"),
        ("[1, 2]", "must be a JSON object, got array"),
        (42, "must be a JSON object, got int"),
        ("[" * 5_000 + "]" * 5_000, "nested"),
        ("[" * 100_000 + "]" * 100_000, "more than 10000 arrays and objects"),
        ('{"x": "' + "a" * (2 << 20) + '"}', "bytes; the limit"),
    ]:
        with pytest.raises(ToolArgumentError, match=fragment):
            registry.call("echo", raw)


def test_a_json_mistake_after_a_secret_does_not_show_it(registry: ToolRegistry) -> None:
    """The refusal quotes the text around the mistake: it quoted the value of the secret key before it."""
    registry.add(lambda api_key="", n=0: n, name="login")
    for raw in ('{"api_key": "sk-SECRET-abc123" "n": 1}', '{"n": 1, "password": "sk-SECRET-abc123",}'):
        result = registry.try_call("login", raw)
        assert result.error is not None and "not valid JSON" in result.error.message
        assert "sk-SECRET" not in result.for_model() and "[REDACTED]" in result.error.message
    near = registry.try_call("login", '{"n": 1 "x": 2}').error
    assert near is not None and '(near \'{"n": 1 "x": 2}\')' in near.message  # the rest is quoted as before


def test_bare_registry_still_checks_names(bare: ToolRegistry) -> None:
    @define_tool(registry=bare)
    def f(a: int) -> int:
        return a

    assert bare.plugins.names() == []
    assert bare.call("f", {"a": "not checked"}) == "not checked"
    with pytest.raises(ToolArgumentError) as err:
        bare.call("f", {"b": 1})
    assert "$.b: unexpected argument" in str(err.value) and "$.a: required argument is missing" in str(err.value)


async def test_async_tools_and_acall(registry: ToolRegistry) -> None:
    @define_tool(registry=registry)
    async def slow_add(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a + b

    main_thread = threading.get_ident()

    @define_tool(registry=registry)
    def where() -> bool:
        return threading.get_ident() != main_thread

    assert await registry.acall("slow_add", {"a": 1, "b": 2}) == 3
    assert await registry.acall("where") is True  # a sync tool runs off the event loop
    with pytest.raises(ToolError, match="acall"):  # call raises ToolErrors only
        registry.call("slow_add", {"a": 1, "b": 2})
    refused = registry.try_call("slow_add", {"a": 1, "b": 2})  # try_call never raises (it raised RuntimeError)
    assert not refused.ok and type(refused.error) is ToolError and "await registry.acall" in refused.for_model()
    result = await registry.atry_call("slow_add", {"a": 1})
    assert not result.ok and isinstance(result.error, ToolArgumentError)


def test_async_tool_from_sync_code(registry: ToolRegistry) -> None:
    @define_tool(registry=registry)
    async def double(x: int) -> int:
        return 2 * x

    assert registry.call("double", {"x": 4}) == 8


def test_add_and_remove_while_calling(registry: ToolRegistry) -> None:
    @define_tool(registry=registry)
    def steady() -> int:
        return 1

    stop = threading.Event()
    errors: list[BaseException] = []
    total = [0]
    lock = threading.Lock()

    def hammer() -> None:
        while not stop.is_set():
            try:
                value = registry.call("steady")
                with lock:
                    total[0] += value
                registry.try_call("flaky")
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(200):
        registry.add(lambda: 2, name="flaky", replace=True)
        if i % 2:
            registry.remove("flaky")
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert total[0] > 0
    assert registry.call_count("steady") == total[0]


def test_counters_are_exact_under_threads(registry: ToolRegistry) -> None:
    @define_tool(registry=registry)
    def tick() -> None:
        return None

    def run() -> None:
        for _ in range(500):
            registry.call("tick")

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert registry.call_count("tick") == 4000
    assert registry.stats()["tools"]["tick"]["calls"] == 4000


def test_plugin_crash_becomes_plugin_error(registry: ToolRegistry) -> None:
    class Broken:
        @hookimpl
        def harness_pre_call(self) -> None:
            raise KeyError("boom")

    registry.plugins.register(Broken(), name="broken")

    @define_tool(registry=registry)
    def ok() -> int:
        return 1

    with pytest.raises(PluginError, match="plugin 'broken'") as err:
        registry.call("ok")
    assert isinstance(err.value.__cause__, KeyError) and err.value.plugin == "broken"


def test_class_level_methods_use_default(fresh_default: ToolRegistry) -> None:
    ToolRegistry.add(lambda: 7, name="seven")
    assert fresh_default.call("seven") == 7
    assert ToolRegistry.call("seven") == 7
    assert ToolRegistry.remove("seven").name == "seven"
    assert "seven" not in fresh_default


def test_public_api_is_explicit() -> None:
    import harness_one
    import harness_one.tools

    for module in (harness_one, harness_one.tools):
        assert len(module.__all__) == len(set(module.__all__))
        for name in module.__all__:
            assert hasattr(module, name), name
            assert not name.startswith("_") or name == "__version__"
    assert {"defineTool", "ToolRegistry", "RateLimitExceeded", "ToolNotFound", "ToolArgumentError"} <= set(
        harness_one.tools.__all__
    )


def test_class_level_methods_follow_the_default_registry() -> None:
    first, second = ToolRegistry(autoload=False), ToolRegistry(autoload=False)
    first.add(lambda: "first", name="which")
    second.add(lambda: "second", name="which")
    old = ToolRegistry.set_default(first)
    try:
        assert ToolRegistry.call("which") == "first" and ToolRegistry.names() == ["which"]
        ToolRegistry.set_default(second)
        assert ToolRegistry.call("which") == "second" and ToolRegistry.try_call("which").value == "second"
        ToolRegistry.set_default(None)  # a fresh default on next use
        assert ToolRegistry.default() is not second and first.call("which") == "first"
    finally:
        ToolRegistry.set_default(old)


def test_super_in_a_subclass_acts_on_the_instance() -> None:
    class Audited(ToolRegistry):
        def call(self, /, name: str, arguments: Any = None, **options: Any) -> Any:  # type: ignore[override]
            return ("audited", super().call(name, arguments, **options))

    ToolRegistry.default()  # a default registry exists
    mine = Audited(autoload=False)
    mine.add(lambda: "mine", name="only_here")
    assert Audited.call is vars(Audited)["call"] and mine.call("only_here") == ("audited", "mine")


def test_class_level_reads_bind_the_default_registry(fresh_default: ToolRegistry) -> None:
    """``ToolRegistry.call`` is the default's bound method; a subclass's own override stays its own."""

    class Plain(ToolRegistry):
        pass

    class Audited(ToolRegistry):
        def call(self, /, name: str, arguments: Any = None, **options: Any) -> Any:  # type: ignore[override]
            return ("audited", super().call(name, arguments, **options))

    fresh_default.add(lambda: "default", name="which")
    for cls in (ToolRegistry, Plain):
        assert cls.call.__self__ is fresh_default and cls.acall.__self__ is fresh_default  # type: ignore[attr-defined]
        assert cls.call("which") == "default"
    assert Audited.call is vars(Audited)["call"]  # the subclass's function, unbound
    assert Audited.add.__self__ is fresh_default and Audited.try_call("which").value == "default"  # type: ignore[attr-defined]
    assert ToolRegistry.call.__doc__ == vars(ToolRegistry)["call"].__doc__

    other = Audited(autoload=False)
    other.add(lambda: "other", name="which")
    old = Plain.set_default(other)  # a subclass sets the one process-wide default
    try:
        assert old is fresh_default and ToolRegistry.default() is other
        assert ToolRegistry.call("which") == ("audited", "other") and Plain.call("which") == ("audited", "other")
        assert Audited.add.__self__ is other  # type: ignore[attr-defined]
    finally:
        ToolRegistry.set_default(old)
    assert ToolRegistry.call("which") == "default"


def test_a_subclass_can_combine_metaclasses(fresh_default: ToolRegistry) -> None:
    """As the docs say: ``type(ToolRegistry)`` and ``ABCMeta`` combine, and class-level calls still work."""
    import abc

    class Meta(type(ToolRegistry), abc.ABCMeta):  # type: ignore[misc]
        pass

    class Abstract(ToolRegistry, abc.ABC, metaclass=Meta):
        @abc.abstractmethod
        def audit(self) -> str: ...

    class Concrete(Abstract):
        def audit(self) -> str:
            return "audited"

    with pytest.raises(TypeError, match="abstract"):
        Abstract()  # type: ignore[abstract]
    fresh_default.add(lambda: "default", name="which")
    mine = Concrete(autoload=False)
    mine.add(lambda: "mine", name="which")
    assert (mine.call("which"), mine.audit()) == ("mine", "audited")
    assert Abstract.call("which") == "default" and Concrete.call.__self__ is fresh_default  # type: ignore[attr-defined]


def test_a_class_level_method_can_be_patched() -> None:
    """``mock.patch.object(ToolRegistry, "call")`` works and is undone (in its own process: it is for good there)."""
    code = textwrap.dedent(
        """
        from unittest import mock
        from harness_one import ToolRegistry
        from harness_one._registry import _SharedType

        reg = ToolRegistry(autoload=False)
        ToolRegistry.set_default(reg)
        reg.add(lambda: "default", name="which")

        class Plain(ToolRegistry):
            pass

        assert isinstance(vars(_SharedType)["call"], property)
        with mock.patch.object(ToolRegistry, "call", return_value=42):
            assert ToolRegistry.call("which") == 42 and Plain.call("which") == 42
            assert reg.call("which") == "default"  # an instance's own binding is not the class's
        assert "call" not in vars(_SharedType)  # the classes' own attributes answer from now on
        assert ToolRegistry.call("which") == "default" and Plain.call("which") == "default"
        with mock.patch.object(Plain, "add", return_value=7):
            assert Plain.add(1) == 7 and ToolRegistry.add.__self__ is reg
        assert Plain.add.__self__ is reg and ToolRegistry.try_call("which").value == "default"
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")


def test_a_call_result_is_immutable(registry: ToolRegistry) -> None:
    registry.add(lambda: 1, name="one")
    result = registry.try_call("one")
    with pytest.raises(AttributeError):
        result.ok = False  # type: ignore[misc]
    assert (result.ok, result.value, result.attempts) == (True, 1, 1)


def test_failed_calls_leave_no_reference_cycle(registry: ToolRegistry) -> None:
    """A refusal or a failure is freed when its result is dropped, without the garbage collector.

    Only garbage that a call's cycle would hold counts (the call, its result, an error, a
    frame, a traceback, a generator): a daemon thread of another test may let go of its own
    cycle meanwhile (a lease keeper ending with nothing left to hold).
    """
    import gc
    from types import FrameType, GeneratorType, TracebackType

    ours = (Call, CallResult, BaseException, FrameType, TracebackType, GeneratorType)

    registry.add(lambda a: 1 / a, name="inv", parameters={"type": "object", "properties": {"a": {"type": "number"}}})
    registry.add(lambda: 1, name="once", rate_limit={"rate": 1e-9, "burst": 1})
    registry.call("once")

    def refused_call() -> None:
        with pytest.raises(RateLimitExceeded):
            registry.call("once")

    def invalid_call() -> None:
        with pytest.raises(ToolArgumentError):
            registry.call("inv", {"a": "x"})

    cases = {
        "refused try_call": lambda: registry.try_call("once"),
        "refused call": refused_call,
        "invalid try_call": lambda: registry.try_call("inv", {"a": "x"}),
        "invalid call": invalid_call,
    }
    for make in cases.values():  # first uses import and build what refusals need (jsonschema, its classes)
        make()
    gc.collect()
    gc.disable()
    try:
        for label, make in cases.items():
            gc.set_debug(gc.DEBUG_SAVEALL)
            for _ in range(5):
                make()
            gc.collect()
            kept = [type(o).__name__ for o in gc.garbage if isinstance(o, ours)]
            gc.garbage.clear()
            gc.set_debug(0)
            assert kept == [], f"{label} left cycles: {sorted(set(kept))}"
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_numbers_its_calls_apart_from_its_parent() -> None:
    reg = ToolRegistry(autoload=False, standard_plugins=False)
    reg.add(lambda: 1, name="one")
    reg.try_call("one")  # the counter has moved before the fork

    def child() -> bytes:  # its call id, drawn in the child
        return reg.try_call("one").call_id.encode()

    theirs = in_child(child).decode()
    mine = reg.try_call("one").call_id
    assert mine.split("-")[0] != theirs.split("-")[0], (mine, theirs)  # without its own prefix, the same id


def test_a_tools_exception_text_is_capped_for_the_model(registry: ToolRegistry) -> None:
    """A tool raising with a 5 MB message: the model reads its start and how much there was (it read all 5 MB)."""

    def loud() -> None:
        raise ValueError("E" * 5_000_000)

    registry.add(loud)
    error = registry.try_call("loud").error
    assert isinstance(error, ToolExecutionError) and len(error.message) < 10_100
    assert error.message.startswith("Tool 'loud' failed: ValueError: EEE")
    assert error.message.endswith("[error text truncated: 5,000,000 characters in all, the first 9,925 shown]")
    assert str(error.__cause__) == "E" * 5_000_000  # the exception itself is kept whole


@pytest.mark.parametrize("mode", ["none", "thread", "process"])
def test_a_tool_exception_whose_str_raises_is_still_the_tools_failure(mode: str) -> None:
    reg = ToolRegistry(autoload=False)
    reg.add(tfp.raise_bad_str, timeout=30, timeout_mode=mode)
    try:
        out = reg.try_call("raise_bad_str")
    finally:
        reg.plugins.get("timeout").processes.shutdown()
    assert out.error is not None and out.error.to_dict()["kind"] == "tool_failed"  # was plugin_error ("a plugin")
    assert out.error.message == "Tool 'raise_bad_str' failed: BadStr"  # its type, once


def _exits() -> None:
    sys.exit(3)  # as argparse does on bad arguments


async def _aexits() -> None:
    sys.exit(4)


@pytest.mark.parametrize(
    ("fn", "setting", "options"),
    [
        (_exits, {"standard_plugins": False}, {}),  # the direct path
        (_exits, {}, {}),  # in the pipeline, no timeout
        (_exits, {}, {"timeout": 5, "timeout_mode": "thread"}),
        (_exits, {}, {"timeout": 5, "timeout_mode": "none"}),
        (_aexits, {}, {}),
        (_aexits, {}, {"timeout": 5}),
    ],
)
def test_a_tool_that_calls_sys_exit_fails_and_never_exits_the_caller(
    fn: Any, setting: dict[str, Any], options: dict[str, Any]
) -> None:
    reg = ToolRegistry(autoload=False, **setting)
    reg.add(fn, name="bye", **options)
    code = 4 if fn is _aexits else 3
    for out in (reg.try_call("bye"), asyncio.run(reg.atry_call("bye"))):
        assert out.error is not None and out.error.kind == "tool_failed"
        assert out.error.message == f"Tool 'bye' failed: SystemExit: {code}"


def test_a_call_the_registry_builds_is_what_call_init_builds(registry: ToolRegistry) -> None:
    """``call``, ``try_call``, ``acall`` and ``atry_call`` set a new Call's fields themselves (no frame for ``__init__``):
    every slot and instance attribute is what ``Call(...)`` sets, so the two stay one definition."""
    seen: list[dict[str, Any]] = []

    def fields(call: Call) -> dict[str, Any]:
        names = [n for n in Call.__slots__ if n != "__dict__"]
        found = {n: getattr(call, n, "<unset>") for n in names}
        found["__dict__"] = dict(vars(call))
        return found

    class Snapshot:
        @hookimpl
        def harness_pre_validate(self, call: Call) -> None:
            seen.append(fields(call))

    registry.plugins.register(Snapshot(), name="snapshot")

    @define_tool(registry=registry)
    def echo(a: int = 0) -> int:
        return a

    def progress(done: float, total: float | None, message: str | None) -> None:
        return None

    for on_progress in (None, progress):
        for call_id in (None, "given-id"):
            seen.clear()
            registry.call("echo", {"a": 1}, call_id=call_id, on_progress=on_progress)
            registry.try_call("echo", {"a": 1}, call_id=call_id, on_progress=on_progress)
            asyncio.run(registry.acall("echo", {"a": 1}, call_id=call_id, on_progress=on_progress))
            asyncio.run(registry.atry_call("echo", {"a": 1}, call_id=call_id, on_progress=on_progress))
            expected = fields(Call(registry, registry.get("echo"), {"a": 1}, None, call_id, None, 0.0, on_progress))
            assert len(seen) == 4
            for got in seen:
                assert type(got.pop("started")) is float
                assert got == {k: v for k, v in expected.items() if k != "started"}
