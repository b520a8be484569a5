"""Review 24, the call pipeline: BaseExceptions from hooks, hooks' answers, the fast path, call.tool, call.timeout."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from harness_one import (
    Await,
    Call,
    Outcome,
    PluginError,
    Retry,
    RetryPolicy,
    ToolArgumentError,
    ToolCancelled,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    hookimpl,
)
from harness_one.hookspecs import applies_to


class Interrupting:
    """An on_error (or pre_call, post_call) hook that raises ``exc`` while armed; records what the later hooks see."""

    order = -100

    def __init__(self, where: str, exc: type[BaseException], when_retry: bool = False) -> None:
        self.where, self.exc, self.when_retry, self.armed = where, exc, when_retry, True

    def _fire(self, where: str, call: Call) -> None:
        if self.armed and self.where == where and (not self.when_retry or type(call.decision) is Retry):
            self.armed = False
            raise self.exc()

    @hookimpl(tryfirst=True)
    def harness_pre_call(self, call: Call) -> None:
        self._fire("pre_call", call)

    @hookimpl(tryfirst=True)
    def harness_post_call(self, call: Call) -> None:
        self._fire("post_call", call)

    @hookimpl(tryfirst=True)
    def harness_on_error(self, call: Call, error: ToolError) -> None:
        self._fire("on_error", call)


class LateInterrupting(Interrupting):
    """As ``Interrupting``, its on_error after the retry plugin's decision (trylast)."""

    order = 1000

    @hookimpl(trylast=True)
    def harness_on_error(self, call: Call, error: ToolError) -> None:
        self._fire("on_error", call)


class LatePreCall(Interrupting):
    """As ``Interrupting``, its pre_call after the concurrency cap took the slot (trylast)."""

    order = 1000

    @hookimpl(trylast=True)
    def harness_pre_call(self, call: Call) -> None:
        self._fire("pre_call", call)


class Seen:
    def __init__(self, order: int = 2000) -> None:
        self.order = order
        self.errors: list[str] = []

    @hookimpl(trylast=True)
    def harness_on_error(self, call: Call, error: ToolError) -> None:
        self.errors.append(type(error).__name__)


class MyBase(BaseException):
    pass


def _run(reg: ToolRegistry, mode: str, name: str, args: Any = None, **kw: Any) -> Any:
    if mode == "call":
        return reg.call(name, args, **kw)
    return asyncio.run(reg.acall(name, args, **kw))


def _boom(fail: bool = False) -> str:
    if fail:
        raise ValueError("tool failed")
    return "ok"


@pytest.mark.parametrize("mode", ["call", "acall"])
@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, MyBase, GeneratorExit])
def test_an_on_error_hooks_base_exception_cancels_the_call_and_the_later_hooks_release(
    mode: str, exc: type[BaseException]
) -> None:
    evil, seen = Interrupting("on_error", exc), Seen()
    reg = ToolRegistry(plugins={"evil": evil, "seen": seen}, autoload=False)
    reg.add(_boom, name="t", max_concurrency=1)
    with pytest.raises(exc):
        _run(reg, mode, "t", {"fail": True}, idempotency_key="k1")
    assert seen.errors == ["ToolCancelled"]
    assert reg.stats()["concurrency"]["running"] == {"t": 0}
    res = reg.try_call("t", {"fail": True}, idempotency_key="k1")  # the key is free: the tool runs again
    assert type(res.error) is ToolExecutionError
    assert str(res.error).startswith("Tool 't' failed: ValueError: tool failed")


@pytest.mark.parametrize("mode", ["call", "acall"])
def test_an_on_error_hooks_interrupt_after_a_retry_was_decided_releases_what_the_retry_kept(mode: str) -> None:
    evil, early, seen = LateInterrupting("on_error", KeyboardInterrupt, when_retry=True), Seen(500), Seen()
    reg = ToolRegistry(plugins={"evil": evil, "early": early, "seen": seen}, autoload=False)
    reg.add(_boom, name="t", max_concurrency=1, retry=RetryPolicy(attempts=3, on=(ValueError,), rerun_non_idempotent=True))
    with pytest.raises(KeyboardInterrupt):
        _run(reg, mode, "t", {"fail": True}, idempotency_key="k1")
    assert early.errors == ["ToolExecutionError", "ToolCancelled"]  # it saw the retry decided: it hears of the cancel
    assert seen.errors == ["ToolCancelled"]
    assert not evil.armed
    assert reg.stats()["concurrency"]["running"] == {"t": 0}
    res = reg.try_call("t", {"fail": True}, idempotency_key="k1")
    assert type(res.error) is ToolExecutionError  # not IdempotencyConflict "still running"


@pytest.mark.parametrize("mode", ["call", "acall"])
@pytest.mark.parametrize("where", ["pre_call", "post_call"])
def test_a_hooks_own_generator_exit_cancels_the_call_as_any_base_exception(mode: str, where: str) -> None:
    evil, seen = (LatePreCall if where == "pre_call" else Interrupting)(where, GeneratorExit), Seen()
    reg = ToolRegistry(plugins={"evil": evil, "seen": seen}, autoload=False)
    reg.add(_boom, name="t", max_concurrency=1)
    with pytest.raises(GeneratorExit):
        _run(reg, mode, "t")
    assert seen.errors == ["ToolCancelled"]
    assert reg.stats()["concurrency"]["running"] == {"t": 0}
    assert reg.try_call("t").value == "ok"


class PostAnswer:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    @hookimpl
    def harness_post_call(self, call: Call) -> Any:
        return self.answer


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        (ToolError("withheld"), "a ToolError"),  # its type only: an answer may hold what a hook redacted
        (Outcome.failure(ToolError("withheld")), "an Outcome"),
        (Outcome.success("[redacted]"), "an Outcome"),
        (42, "an int"),
    ],
)
def test_a_post_call_hook_that_returns_an_answer_fails_the_call(answer: Any, shown: str) -> None:
    reg = ToolRegistry(plugins={"dlp": PostAnswer(answer)}, autoload=False)
    reg.add(lambda: "the SECRET", name="leak")
    expected = (
        f"The post_call hook of plugin 'dlp' returned {shown} while calling 'leak'; expected None or an Await "
        "(assign call.result, or raise a ToolError to refuse it)"
    )
    for res in (reg.try_call("leak"), asyncio.run(reg.atry_call("leak"))):
        assert not res.ok and res.value is None
        assert type(res.error) is PluginError and res.error.plugin == "dlp"
        assert str(res.error) == expected
    with pytest.raises(PluginError, match="post_call hook of plugin 'dlp'"):
        reg.call("leak")


def test_a_post_call_hook_that_returns_none_changes_nothing() -> None:
    reg = ToolRegistry(plugins={"ok": PostAnswer(None)}, autoload=False)
    reg.add(lambda: "fine", name="t")
    assert reg.call("t") == "fine"


class PreValidateAnswer:
    @hookimpl
    def harness_pre_validate(self, call: Call) -> Any:
        if call.arguments.get("path", "").startswith("/etc"):
            return ToolArgumentError("path: outside the sandbox")
        return None


def test_a_pre_validate_hook_that_returns_an_error_refuses_the_arguments() -> None:
    ran: list[str] = []
    reg = ToolRegistry(plugins={"pv": PreValidateAnswer()}, autoload=False)
    reg.add(lambda path="": ran.append(path) or "read", name="read")
    res = reg.try_call("read", {"path": "/etc/shadow"})
    assert ran == []
    assert type(res.error) is PluginError and res.error.plugin == "pv"
    assert str(res.error) == (
        "The pre_validate hook of plugin 'pv' returned a ToolArgumentError while calling "
        "'read'; expected None (replace call.arguments, or raise a ToolArgumentError to refuse them)"
    )
    assert reg.call("read", {"path": "/tmp/x"}) == "read" and ran == ["/tmp/x"]


class StripKeys:
    @hookimpl
    def harness_pre_validate(self, call: Call) -> None:
        call.arguments = {k.strip(): v for k, v in call.arguments.items()}  # trusts keys to be strings


@pytest.mark.parametrize("std", [True, False])
def test_a_key_that_is_no_string_is_the_callers_error_even_when_a_pre_validate_hook_fails_on_it(std: bool) -> None:
    from types import MappingProxyType

    def add(a: int, b: int) -> int:
        return a + b

    reg = ToolRegistry(plugins={"norm": StripKeys()}, standard_plugins=std, autoload=False)
    reg.add(add)
    for args, shown in (({1: 2, "a": 1, "b": 2}, "integer 1"), (MappingProxyType({(1, 2): 3, "a": 1, "b": 2}), "array (1, 2)")):
        res = reg.try_call("add", args)
        assert type(res.error) is ToolArgumentError
        assert str(res.error) == (
            f"Invalid arguments for tool 'add' (1 problem):\n- $: property names must be strings, got {shown}\n"
            "Fix the arguments and call 'add' again."
        )
        assert type(res.error.__cause__) is AttributeError
    assert reg.call("add", {" a": 1, "b ": 2}) == 3


class BadStr:
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_the_fast_path_of_call_takes_call_ids_and_names_errors_as_the_pipeline_does(bare: ToolRegistry) -> None:
    def t(a: int) -> int:
        if a < 0:
            raise ToolArgumentError("a must be positive")
        return a

    bare.add(t)
    with pytest.raises(ToolExecutionError) as info:
        bare.call("t", {"a": "x"}, call_id=123)  # type: ignore[arg-type]
    assert info.value.call_id == "123"
    assert bare.call("t", {"a": 1}, call_id=123) == 1  # type: ignore[arg-type]
    for bad in (2**20000, BadStr()):
        with pytest.raises(ToolArgumentError, match="call_id: expected a string"):
            bare.call("t", {"a": 1}, call_id=bad)  # type: ignore[arg-type]
    with pytest.raises(ToolArgumentError) as refused:
        bare.call("t", {"b": 1}, call_id="")
    assert refused.value.call_id == ""
    for mode in ("call", "try"):
        if mode == "call":
            with pytest.raises(ToolArgumentError) as own:
                bare.call("t", {"a": -1})
            err: Any = own.value
        else:
            err = bare.try_call("t", {"a": -1}).error
        assert (
            str(err)
            == "Invalid arguments for tool 't' (1 problem):\n- $: a must be positive\nFix the arguments and call 't' again."
        )


class SwapTool:
    def __init__(self, to: Any) -> None:
        self.to = to

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        call.tool = self.to


@pytest.mark.parametrize("std", [True, False])
def test_a_hook_that_reassigns_call_tool_changes_neither_what_runs_nor_what_the_result_names(std: bool) -> None:
    other = ToolRegistry(standard_plugins=False, autoload=False)
    other.add(lambda: "B", name="b")
    reg = ToolRegistry(plugins={"swap": SwapTool(other.get("b"))}, standard_plugins=std, autoload=False)
    reg.add(lambda: "A", name="a")
    assert reg.call("a") == "A"
    assert asyncio.run(reg.acall("a")) == "A"
    res, ares = reg.try_call("a"), asyncio.run(reg.atry_call("a"))
    assert (res.ok, res.value, res.tool) == (True, "A", "a")
    assert (ares.ok, ares.value, ares.tool) == (True, "A", "a")


def test_atry_call_returns_a_result_when_a_hook_sets_call_tool_to_none(bare: ToolRegistry) -> None:
    reg = ToolRegistry(plugins={"swap": SwapTool(None)}, standard_plugins=False, autoload=False)
    reg.add(lambda: "A", name="a")
    ares = asyncio.run(reg.atry_call("a"))  # never raises
    assert (ares.ok, ares.value, ares.tool) == (True, "A", "a")


def test_a_plugin_whose_order_raises_is_refused_with_a_plugin_error_naming_it(bare: ToolRegistry) -> None:
    class OrderRaises:
        @property
        def order(self) -> int:
            raise RuntimeError("order broke")

        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            raise AssertionError("never registered")

    with pytest.raises(PluginError) as info:
        bare.plugins.register(OrderRaises(), name="bad")
    assert str(info.value) == "Plugin 'bad': reading its order failed: RuntimeError: order broke."
    assert info.value.plugin == "bad" and type(info.value.__cause__) is RuntimeError
    assert "bad" not in bare.plugins.names()


class SetTimeout:
    def __init__(self, value: Any) -> None:
        self.value = value

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        call.timeout = self.value


def _sync_tool(ran: list[str]) -> Any:
    def slow() -> str:
        ran.append("slow")
        return "done"

    return slow


def _async_tool(ran: list[str]) -> Any:
    async def aslow() -> str:
        ran.append("aslow")
        return "done"

    return aslow


@pytest.mark.parametrize("make", [_sync_tool, _async_tool])
def test_a_bad_call_timeout_is_the_plugins_fault_and_one_not_above_zero_times_out_in_every_mode(make: Any) -> None:
    for value, kind in (("5", PluginError), (True, PluginError), (math.nan, ToolTimeout), (0, ToolTimeout), (-1.0, ToolTimeout)):
        ran: list[str] = []
        reg = ToolRegistry(plugins={"t": SetTimeout(value)}, standard_plugins=False, autoload=False)
        tool = make(ran)
        reg.add(tool)
        name = tool.__name__
        errors = [reg.try_call(name).error, asyncio.run(reg.atry_call(name)).error]
        for err in errors:
            assert type(err) is kind
            if kind is PluginError:
                assert str(err).startswith(f"The pre_call hook of a plugin set call.timeout to {value!r} while calling '{name}'")
            else:
                assert str(err).startswith(f"Tool '{name}' timed out after {value:g} s.")
        assert ran == []
    reg = ToolRegistry(plugins={"t": SetTimeout(5)}, standard_plugins=False, autoload=False)
    ran = []
    reg.add(make(ran))
    assert reg.try_call(make(ran).__name__).value == "done"  # an int is a number of seconds


# --- review D4 ---------------------------------------------------------------------------------------------


class SlowPreCall:
    """A pre_call hook after the timeout plugin's that uses up the call's total timeout (an injected clock)."""

    order = 500

    def __init__(self, clock: Any) -> None:
        self.clock = clock

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.clock.advance(0.3)


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s

    def sleep(self, s: float) -> None:
        self.t += s

    async def asleep(self, s: float) -> None:
        self.t += s


@pytest.mark.parametrize("mode", ["call", "acall"])
def test_a_sync_tool_in_none_mode_starts_after_hooks_used_up_the_total(mode: str) -> None:
    clock, ran = _Clock(), []
    reg = ToolRegistry(plugins={"slow": SlowPreCall(clock)}, autoload=False, clock=clock)
    reg.add(lambda: ran.append(1) or "done", name="t", timeout=5, total_timeout=0.2, timeout_mode="none")
    assert _run(reg, mode, "t") == "done" and ran == [1]  # its deadline is advisory


class SetTimeoutAfter:
    order = 500

    def __init__(self, value: Any) -> None:
        self.value = value

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        call.timeout = self.value


@pytest.mark.parametrize("mode", ["call", "acall"])
def test_none_mode_still_refuses_a_timeout_not_above_0_or_no_number(mode: str) -> None:
    reg = ToolRegistry(plugins={"set": SetTimeoutAfter(0)}, autoload=False)
    reg.add(lambda: "done", name="t", timeout=5, timeout_mode="none")
    with pytest.raises(ToolTimeout, match=r"^Tool 't' timed out after 0 s\."):
        _run(reg, mode, "t")
    reg = ToolRegistry(plugins={"set": SetTimeoutAfter("5")}, autoload=False)
    reg.add(lambda: "done", name="t", timeout=5, timeout_mode="none")
    with pytest.raises(PluginError, match=r"^The pre_call hook of a plugin set call.timeout to '5' while calling 't'; "):
        _run(reg, mode, "t")


class RedactingPost:
    """A post_call hook that (wrongly) returns the original it replaced."""

    @hookimpl
    def harness_post_call(self, call: Call) -> Any:
        original, call.result = call.result, "[redacted]"
        return original


def test_a_post_call_hooks_returned_value_is_not_quoted_in_the_error() -> None:
    reg = ToolRegistry(plugins={"redact": RedactingPost()}, autoload=False)
    reg.add(lambda: "password hunter2", name="login")
    res = reg.try_call("login")
    assert type(res.error) is PluginError
    assert str(res.error) == (
        "The post_call hook of plugin 'redact' returned a str while calling 'login'; expected None or an Await "
        "(assign call.result, or raise a ToolError to refuse it)"
    )
    assert "hunter2" not in res.for_model()


class AwaitAnswer:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    @hookimpl
    def harness_post_call(self, call: Call) -> Any:
        async def aio() -> Any:
            return self.answer

        return Await(lambda: self.answer, aio)


@pytest.mark.parametrize(
    ("answer", "shown"),
    [(ToolError("withheld"), "a ToolError"), (Outcome.failure(ToolError("withheld")), "an Outcome"), (42, "an int")],
)
def test_a_post_call_awaits_answer_other_than_none_fails_the_call(answer: Any, shown: str) -> None:
    reg = ToolRegistry(plugins={"dlp": AwaitAnswer(answer)}, autoload=False)
    reg.add(lambda: "the SECRET is hunter2", name="leak")
    for res in (reg.try_call("leak"), asyncio.run(reg.atry_call("leak"))):
        assert not res.ok and res.value is None
        assert type(res.error) is PluginError and res.error.plugin == "dlp"
        assert str(res.error) == (
            f"The post_call hook of plugin 'dlp' returned an Await that answered {shown} while calling 'leak'; "
            "expected None (assign call.result, or raise a ToolError in sync()/aio() to refuse it)"
        )
    reg = ToolRegistry(plugins={"ok": AwaitAnswer(None)}, autoload=False)
    reg.add(lambda: "fine", name="t")
    assert reg.call("t") == "fine"


class SwapToolAt:
    order = 500  # after the timeout plugin's pre_call

    def __init__(self, where: str, to: Any, then: Any = None) -> None:
        self.where, self.to, self.then = where, to, then

    @hookimpl
    def harness_pre_validate(self, call: Call) -> None:
        if self.where == "pre_validate":
            call.tool = self.to

    @hookimpl
    def harness_pre_call(self, call: Call) -> Any:
        if self.where == "pre_call":
            call.tool = self.to
            if self.then is not None:
                call.timeout = self.then
        return None


def _tool_a(x: int, call: Call) -> str:
    return f"A x={x} attempt={call.attempt}"


@pytest.mark.parametrize("mode", ["try_call", "atry_call"])
def test_a_hook_reassigning_call_tool_changes_neither_the_converters_nor_the_names(mode: str) -> None:
    def run(reg: ToolRegistry, *args: Any) -> Any:
        return reg.try_call("a", *args) if mode == "try_call" else asyncio.run(reg.atry_call("a", *args))

    reg = ToolRegistry(autoload=False)
    reg.add(_tool_a, name="a")
    other = reg.add(lambda x: f"B {x}", name="b")
    reg.plugins.register(SwapToolAt("pre_validate", other), name="swap")
    res = run(reg, {"x": 1})
    assert res.ok and res.value == "A x=1 attempt=1"  # a's Call parameter, not b's signature
    for then, kind, text in (
        (0, ToolTimeout, "Tool 'a' timed out after 0 s."),
        ("5", PluginError, "The pre_call hook of a plugin set call.timeout to '5' while calling 'a';"),
    ):
        reg = ToolRegistry(autoload=False)
        reg.add(lambda: "A", name="a", timeout=5)
        other = reg.add(lambda: "B", name="b")
        reg.plugins.register(SwapToolAt("pre_call", other, then), name="swap")
        res = run(reg)
        assert type(res.error) is kind and res.tool == "a" and res.error.tool == "a"
        assert str(res.error).startswith(text)


class InterruptingAwait:
    """Two post_call hooks whose Await's sync() is interrupted (Ctrl-C twice while the call unwinds)."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    @hookimpl
    def harness_post_call(self, call: Call) -> Any:
        def sync() -> None:
            self.log.append("post_call sync")
            raise KeyboardInterrupt

        async def aio() -> None:
            return None

        return Await(sync, aio)


class WatchErrors:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    @hookimpl
    def harness_on_error(self, call: Call, error: ToolError) -> None:
        self.log.append(f"on_error {type(error).__name__}")


def test_the_cores_own_close_of_an_interrupted_call_runs_no_on_error_pass() -> None:
    log: list[str] = []
    reg = ToolRegistry(
        plugins={"p1": InterruptingAwait(log), "p2": InterruptingAwait(log), "watch": WatchErrors(log)}, autoload=False
    )
    reg.add(lambda: "value", name="t")
    with pytest.raises(KeyboardInterrupt):
        reg.call("t")
    assert log == ["post_call sync", "post_call sync"]  # the tool returned: no ToolCancelled after its success


class ReleaseByAwait:
    """An on_error hook after the interrupting one that releases through an Await; records how it was fetched."""

    order = 3000

    def __init__(self) -> None:
        self.fetched: list[str] = []

    @hookimpl(trylast=True)
    def harness_on_error(self, call: Call, error: ToolError) -> Any:
        def sync() -> None:
            self.fetched.append("sync")

        async def aio() -> None:
            self.fetched.append("aio")

        return Await(sync, aio)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, MyBase, GeneratorExit])
@pytest.mark.parametrize("where", ["pre_call", "on_error"])
def test_under_acall_the_cancel_pass_after_a_hooks_base_exception_awaits_aio(where: str, exc: type[BaseException]) -> None:
    rel = ReleaseByAwait()
    reg = ToolRegistry(plugins={"evil": Interrupting(where, exc), "rel": rel}, autoload=False)
    reg.add(_boom, name="t")
    with pytest.raises(exc):
        asyncio.run(reg.acall("t", {"fail": True}))
    assert rel.fetched == ["aio"]  # never sync() on the loop's thread


class Decides:
    @hookimpl
    def harness_on_error(self, call: Call, error: ToolError) -> Any:
        return Outcome.success("fallback") if not isinstance(error, ToolCancelled) else None


class AfterDecision:
    def __init__(self, order: int, log: list[str], raises: bool) -> None:
        self.order, self.log, self.raises = order, log, raises

    @hookimpl
    @applies_to(after_decision=True)
    def harness_on_error(self, call: Call, error: ToolError) -> None:
        self.log.append(f"{self.order} {type(error).__name__}")
        if self.raises and not isinstance(error, ToolCancelled):
            raise KeyboardInterrupt


@pytest.mark.parametrize("mode", ["call", "acall"])
def test_after_decision_hooks_hear_of_the_cancel_one_of_them_raises(mode: str) -> None:
    log: list[str] = []
    reg = ToolRegistry(
        plugins={"d": Decides(), "ad1": AfterDecision(1, log, True), "ad2": AfterDecision(2, log, False)}, autoload=False
    )
    reg.add(_boom, name="t")
    with pytest.raises(KeyboardInterrupt):
        _run(reg, mode, "t", {"fail": True})
    assert log == ["1 ToolExecutionError", "1 ToolCancelled", "2 ToolCancelled"]


class FailsOnce:
    """A post_call hook that fails once (an audit log that is down, then back)."""

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("audit log down")


def test_a_key_keeps_the_tools_value_when_a_post_call_hook_fails_and_replays_it() -> None:
    runs: list[int] = []
    reg = ToolRegistry(plugins={"audit": FailsOnce()}, autoload=False)
    reg.add(lambda: runs.append(1) or "value", name="t")
    first = reg.try_call("t", idempotency_key="k")
    assert type(first.error) is PluginError
    assert str(first.error) == "Internal error in plugin 'audit' while calling 't': RuntimeError: audit log down"
    replay = reg.try_call("t", idempotency_key="k")
    assert replay.ok and replay.value == "value" and not replay.ran and runs == [1]
