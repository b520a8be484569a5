"""The hook pipeline: order, decisions, blocking and replacing plugins by name."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from harness_one import (
    Call,
    Outcome,
    PluginError,
    RateLimitExceeded,
    Retry,
    ToolArgumentError,
    ToolError,
    ToolExecutionError,
    ToolNotFound,
    ToolRegistry,
    define_tool,
    hookimpl,
)


class Recorder:
    def __init__(self, log: list[str], tag: str) -> None:
        self.log = log
        self.tag = tag

    @hookimpl
    def harness_pre_validate(self, call: Call) -> None:
        self.log.append(f"{self.tag}:pre_validate")

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        self.log.append(f"{self.tag}:pre_call:{call.attempt}")

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        self.log.append(f"{self.tag}:post_call:{call.result}")

    @hookimpl
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        self.log.append(f"{self.tag}:on_error:{type(error).__name__}")


def test_order_of_one_call(bare: ToolRegistry) -> None:
    log: list[str] = []
    bare.plugins.register(Recorder(log, "a"), name="a")
    bare.plugins.register(Recorder(log, "b"), name="b")

    @define_tool(registry=bare)
    def f() -> int:
        log.append("tool")
        return 1

    bare.call("f")
    # pluggy order: the later-registered plugin runs first.
    assert log == ["b:pre_validate", "a:pre_validate", "b:pre_call:1", "a:pre_call:1", "tool", "b:post_call:1", "a:post_call:1"]


def test_pre_validate_normalises_and_post_call_transforms(bare: ToolRegistry) -> None:
    class Lower:
        @hookimpl
        def harness_pre_validate(self, call: Call) -> None:
            call.arguments = {k.lower(): v for k, v in call.arguments.items()}

        @hookimpl
        def harness_post_call(self, call: Call) -> None:
            call.result = {"wrapped": call.result}

    bare.plugins.register(Lower(), name="lower")
    bare.add(lambda x: x * 2, name="dbl")
    assert bare.call("dbl", {"X": 3}) == {"wrapped": 6}


def test_pre_call_outcome_short_circuits(bare: ToolRegistry) -> None:
    ran: list[int] = []

    class Cache:
        @hookimpl
        def harness_pre_call(self, call: Call) -> Outcome | None:
            return Outcome.success("cached") if call.arguments.get("x") == 1 else None

    class Refuse:
        @hookimpl(tryfirst=True)
        def harness_pre_call(self, call: Call) -> Outcome | None:
            if call.arguments.get("x") == 2:
                return Outcome.failure(ToolError("stored failure"))
            return None

    bare.plugins.register(Cache(), name="cache")
    bare.plugins.register(Refuse(), name="refuse")
    bare.add(lambda x: ran.append(x) or "fresh", name="f")
    assert bare.call("f", {"x": 1}) == "cached"
    assert bare.call("f", {"x": 3}) == "fresh"
    with pytest.raises(ToolError, match="stored failure"):
        bare.call("f", {"x": 2})
    assert ran == [3]


@pytest.mark.parametrize("how", ["raise", "return", "outcome"])
def test_a_pre_call_refusal_returned_is_the_same_as_raised(bare: ToolRegistry, clock: Any, how: str) -> None:
    """A pre_call hook may return its ToolError (what the rate limit does) instead of raising it:
    on_error sees it, a Retry runs the call again, post_call does not run, and both callers get it."""
    bare.clock = clock
    seen: list[str] = []

    class Gate:
        @hookimpl
        def harness_pre_call(self, call: Call) -> Outcome | ToolError | None:
            if call.peek("gate.refused") or call.arguments["x"] == 0:
                return None
            call.state["gate.refused"] = True
            refusal = RateLimitExceeded(retry_after=0.25, tool=call.tool.name)
            if how == "raise":
                raise refusal
            return refusal if how == "return" else Outcome.failure(refusal)

        @hookimpl
        def harness_post_call(self, call: Call) -> None:
            seen.append(f"post:{call.result}")

        @hookimpl
        def harness_on_error(self, call: Call, error: BaseException) -> Retry | None:
            seen.append(f"error:{type(error).__name__}:{call.attempt}:{call.ran}")
            return Retry(0.5) if call.arguments["x"] == 2 else None

    bare.plugins.register(Gate(), name="gate")
    bare.add(lambda x: x * 10, name="f")
    with pytest.raises(RateLimitExceeded) as refused:
        bare.call("f", {"x": 1})
    assert refused.value.retry_after == 0.25 and refused.value.call_id is not None and refused.value.tool == "f"
    result = bare.try_call("f", {"x": 1})
    assert not result.ok and type(result.error) is RateLimitExceeded and result.error.call_id == result.call_id
    assert result.attempts == 1
    assert bare.call("f", {"x": 2}) == 20  # retried after the refusal, as a raised one is
    assert clock.sleeps == [0.5]
    assert seen == ["error:RateLimitExceeded:1:False"] * 2 + ["error:RateLimitExceeded:1:False", "post:20"]


def test_on_error_hooks_of_a_raised_failure_run_while_it_is_handled(bare: ToolRegistry) -> None:
    """``sys.exc_info()`` in on_error is the failure (``logging.exception`` reports it), for what the
    tool raised, what a pre_call or post_call hook raised, and refused arguments alike."""
    import sys

    seen: list[str] = []

    class Reporter:
        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            if call.arguments.get("x") == 2:
                raise ToolError("refused by a guard")

        @hookimpl
        def harness_post_call(self, call: Call) -> None:
            if call.arguments.get("x") == 3:
                raise ToolError("refused after the run")

        @hookimpl
        def harness_on_error(self, error: BaseException) -> None:
            handled = sys.exc_info()[1]
            seen.append(type(handled).__name__ if handled is error or handled is error.__cause__ else repr(handled))

    bare.plugins.register(Reporter(), name="reporter")

    def boom(x: int) -> int:
        if x == 1:
            raise ValueError("disk full")
        return x

    bare.add(boom)
    for args in ({"x": 1}, {"x": 2}, {"x": 3}, {"y": 1}):
        assert not bare.try_call("boom", args).ok
    assert seen == ["ToolExecutionError", "ToolError", "ToolError", "ToolArgumentError"]


def test_a_pre_call_answer_of_another_type_is_the_plugins_error(bare: ToolRegistry) -> None:
    class Odd:
        @hookimpl
        def harness_pre_call(self, call: Call) -> Any:
            return ValueError("not a ToolError")

    bare.plugins.register(Odd(), name="odd")
    bare.add(lambda: 1, name="f")
    with pytest.raises(PluginError, match="expected an Outcome, a ToolError or None"):
        bare.call("f")


def test_on_error_retry_and_recover(bare: ToolRegistry, clock: Any) -> None:
    bare.clock = clock
    attempts: list[int] = []

    class RetryTwice:
        @hookimpl
        def harness_on_error(self, call: Call, error: BaseException) -> Retry | Outcome | None:
            if isinstance(error, ToolArgumentError):
                return None
            if call.attempt < 3:
                return Retry(delay=0.5)
            return Outcome.success("gave up nicely")

    bare.plugins.register(RetryTwice(), name="retry")

    def flaky(call: Call) -> str:
        attempts.append(call.attempt)
        raise OSError("down")

    bare.add(flaky)
    assert bare.call("flaky") == "gave up nicely"
    assert attempts == [1, 2, 3]
    assert clock.sleeps == [0.5, 0.5]
    result = bare.try_call("flaky")
    assert result.ok and result.attempts == 3


def test_on_error_can_translate(bare: ToolRegistry) -> None:
    class Translate:
        @hookimpl
        def harness_on_error(self, error: BaseException) -> Outcome:
            return Outcome.failure(ToolError(f"friendly: {error}"))

    bare.plugins.register(Translate(), name="translate")
    bare.add(lambda: 1 / 0, name="boom")
    with pytest.raises(ToolError, match="friendly: Tool 'boom' failed") as err:
        bare.call("boom")
    assert isinstance(err.value.__cause__, ToolExecutionError)


def test_errors_in_pre_validate_reach_on_error_but_are_not_retried(bare: ToolRegistry) -> None:
    seen: list[str] = []

    class Watch:
        @hookimpl
        def harness_on_error(self, error: BaseException) -> Retry:
            seen.append(type(error).__name__)
            return Retry(0)

    bare.plugins.register(Watch(), name="watch")
    bare.add(lambda a: a, name="f")
    with pytest.raises(ToolArgumentError):
        bare.call("f", "{bad")
    assert seen == ["ToolArgumentError"]


@pytest.mark.parametrize("answer", [Retry(0), Outcome.success("recovered")], ids=["retry", "recovery"])
def test_a_retry_or_a_recovery_before_admission_is_no_decision_for_the_hooks_after_it(bare: ToolRegistry, answer: Any) -> None:
    """The caller gets the argument error, so the hooks after the answer see it stand: ``call.decision``
    stays None (an observer that saw a Retry would wait for an attempt that never comes)."""
    decisions: list[Any] = []

    class Answers:
        @hookimpl(tryfirst=True)
        def harness_on_error(self, call: Call) -> Any:
            return answer if call.attempt == 1 else None  # one retry at most

    class Observes:
        @hookimpl(trylast=True)
        def harness_on_error(self, call: Call) -> None:
            decisions.append(call.decision)

    bare.plugins.register(Answers(), name="answers")
    bare.plugins.register(Observes(), name="observes")
    bare.add(lambda a: a, name="f")
    result = bare.try_call("f", "{bad")
    assert not result.ok and isinstance(result.error, ToolArgumentError)
    assert decisions == [None]
    bare.add(lambda: 1 / 0, name="boom")  # after admission the same answer is the decision
    bare.try_call("boom")
    assert decisions[1] is answer


def test_per_call_wrappers_are_refused_at_registration(bare: ToolRegistry) -> None:
    log: list[str] = []

    class Wrap:
        @hookimpl(wrapper=True)
        def harness_post_call(self, call: Call) -> Generator[None, Any, Any]:
            log.append("before")
            try:
                return (yield)
            finally:
                log.append("after")

    bare.plugins.register(Recorder(log, "r"), name="r")
    with pytest.raises(PluginError, match="'wrap': harness_post_call is a wrapper"):
        bare.plugins.register(Wrap(), name="wrap")
    assert "wrap" not in bare.plugins and bare.plugins.names() == ["r"]
    bare.add(lambda: 5, name="five")
    assert bare.call("five") == 5
    assert log == ["r:pre_validate", "r:pre_call:1", "r:post_call:5"]


def test_standard_plugins_load_by_name(registry: ToolRegistry) -> None:
    assert set(registry.plugins.names()) == {
        "validation",
        "rate_limit",
        "logging",
        "metrics",
        "timeout",
        "retry",
        "idempotency",
        "concurrency",
        "circuit_breaker",
        "cache",
        "budget",
        "approval",
        "output_limit",
        "otel",
    }
    assert registry.plugins.sources["validation"] == "harness-one"


def test_block_by_api_takes_plugin_out(registry: ToolRegistry) -> None:
    registry.add(lambda n: n, name="f", parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    with pytest.raises(ToolArgumentError):
        registry.call("f", {"n": "x"})
    registry.plugins.block("validation")
    assert "validation" not in registry.plugins and registry.plugins.is_blocked("validation")
    assert registry.call("f", {"n": "x"}) == "x"  # calls go through unvalidated
    blocked_at_start = ToolRegistry(block=["validation"], autoload=False)
    assert "validation" not in blocked_at_start.plugins.names()


def test_block_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_ONE_BLOCK_PLUGINS", "rate_limit, logging")
    reg = ToolRegistry()
    assert "rate_limit" not in reg.plugins.names() and "logging" not in reg.plugins.names()
    assert "validation" in reg.plugins.names() and reg.plugins.is_blocked("rate_limit")
    monkeypatch.setenv("HARNESS_ONE_PLUGINS", "metrics")
    monkeypatch.delenv("HARNESS_ONE_BLOCK_PLUGINS")
    assert ToolRegistry().plugins.names() == ["metrics"]


def test_replace_standard_plugin_by_name(registry: ToolRegistry) -> None:
    calls: list[str] = []

    class MyLimiter:
        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            calls.append(call.tool.name)

    registry.add(lambda: 1, name="f", rate_limit={"rate": 1, "burst": 1})
    registry.plugins.replace("rate_limit", MyLimiter())
    for _ in range(3):
        registry.call("f")  # the standard limiter would refuse the second call
    assert calls == ["f", "f", "f"]
    assert isinstance(registry.plugins.get("rate_limit"), MyLimiter)


def test_plugins_given_at_construction(clock: Any) -> None:
    class Tagger:
        @hookimpl
        def harness_post_call(self, call: Call) -> None:
            call.result = f"<{call.result}>"

    reg = ToolRegistry(plugins={"tagger": Tagger}, standard_plugins=False, autoload=False)
    reg.add(lambda: "x", name="f")
    assert reg.call("f") == "<x>" and reg.plugins.names() == ["tagger"]


def test_tool_added_hook_sees_existing_tools_when_plugin_joins_late(bare: ToolRegistry) -> None:
    bare.add(lambda: 1, name="early")
    seen: list[str] = []

    class Prep:
        @hookimpl
        def harness_tool_added(self, tool: Any) -> None:
            seen.append(tool.name)

        @hookimpl
        def harness_tool_removed(self, tool: Any) -> None:
            seen.append("-" + tool.name)

    bare.plugins.register(Prep(), name="prep")
    bare.add(lambda: 2, name="late")
    bare.remove("early")
    assert seen == ["early", "late", "-early"]


def test_third_party_plugin_from_entry_point_and_failures(dists: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    dists.make(
        "hx-plugins",
        {
            "hx_good": """
                from harness_one import hookimpl

                class Shout:
                    @hookimpl
                    def harness_post_call(self, call):
                        call.result = str(call.result).upper()
            """,
            "hx_bad": "raise ImportError('missing dependency: frobnicate')\n",
        },
        {"harness_one.plugins": {"shout": "hx_good:Shout", "broken": "hx_bad:Plugin"}},
    )
    reg = ToolRegistry()
    reg.add(lambda: "hi", name="f")
    assert reg.call("f") == "HI"
    assert reg.plugins.sources["shout"] == "hx-plugins"
    assert [(f.name, f.distribution) for f in reg.plugins.failures] == [("broken", "hx-plugins")]
    assert "frobnicate" in reg.plugins.failures[0].error
    with pytest.raises(PluginError, match="broken"):
        ToolRegistry(strict=True)
    monkeypatch.setenv("HARNESS_ONE_DISABLE_PLUGIN_AUTOLOAD", "1")
    quiet = ToolRegistry()
    assert "shout" not in quiet.plugins.names() and "validation" in quiet.plugins.names()


@pytest.mark.parametrize("dist", ["aaa-limits", "zzz-limits"])  # before and after harness-one by name
def test_an_entry_point_of_a_standard_name_replaces_it_whatever_its_distribution_is_called(dists: Any, dist: str) -> None:
    module = dist.replace("-", "_")
    dists.make(
        dist,
        {module: "class Limits:\n    name = 'rate_limit'\n"},
        {"harness_one.plugins": {"rate_limit": f"{module}:Limits"}},
    )
    reg = ToolRegistry()
    assert reg.plugins.failures == [] and reg.plugins.sources["rate_limit"] == dist
    assert type(reg.plugins.get("rate_limit")).__module__ == module


@pytest.mark.parametrize("dist", ["aaa-limits", "zzz-limits"])
def test_a_replacement_that_fails_to_load_leaves_the_standard_plugin(dists: Any, dist: str) -> None:
    """A broken third-party ``rate_limit`` plugin: the standard one still limits (neither was active)."""
    module = dist.replace("-", "_")
    dists.make(dist, {module: "import not_a_real_module\n"}, {"harness_one.plugins": {"rate_limit": f"{module}:Limits"}})
    reg = ToolRegistry(autoload=True)
    assert [(f.name, f.distribution) for f in reg.plugins.failures] == [("rate_limit", dist)]
    assert reg.plugins.sources["rate_limit"] == "harness-one"
    reg.add(lambda: 8, name="eight", rate_limit={"rate": 1, "burst": 1})
    assert reg.call("eight") == 8
    with pytest.raises(RateLimitExceeded):
        reg.call("eight")


def test_applies_to_skips_unrelated_tools(bare: ToolRegistry) -> None:
    from harness_one import applies_to

    seen: list[str] = []

    class OnlyTagged:
        @hookimpl
        @applies_to(lambda plugin, tool: "watched" in tool.tags)
        def harness_pre_call(self, call: Call) -> None:
            seen.append(call.tool.name)

    bare.plugins.register(OnlyTagged(), name="only")
    bare.add(lambda: 1, name="plain")
    bare.add(lambda: 2, name="tagged", tags=["watched"])
    bare.call("plain")
    bare.call("tagged")
    assert seen == ["tagged"]
    assert len(bare.plugins.plan.for_tool(bare.get("plain")).pre_call) == 0
    bare.add(lambda: 3, name="plain", tags=["watched"], replace=True)  # a replaced tool is planned afresh
    bare.call("plain")
    assert seen == ["tagged", "plain"]


def test_per_tool_prepares_once_per_tool_and_runs_what_it_prepared(bare: ToolRegistry) -> None:
    from harness_one import Await, per_tool

    prepared: list[str] = []
    seen: list[tuple[str, str]] = []

    class Prepared:
        def prepare(self, tool: Any) -> Any:
            prepared.append(tool.name)
            if tool.name == "skipped":
                return None
            label = tool.name.upper()  # looked up once, when the plan is prepared

            def pre_call(call: Call) -> None:
                seen.append((call.tool.name, label))
                if call.arguments.get("boom"):
                    raise KeyError("prepared")
                if call.arguments.get("wait"):
                    return Await(lambda: 1 / 0, lambda: None)  # type: ignore[return-value]
                return None

            return pre_call

        @hookimpl
        @per_tool(lambda plugin, tool: plugin.prepare(tool))
        def harness_pre_call(self, call: Call) -> None:
            raise AssertionError("the pipeline calls the prepared function, not this one")

        @hookimpl
        @per_tool(lambda plugin, tool: lambda call: seen.append((call.tool.name, "error")))
        def harness_on_error(self, call: Call) -> None:  # a subset of the spec's arguments
            raise AssertionError("not called either")

    bare.plugins.register(Prepared(), name="prepared")
    bare.add(lambda boom=False, wait=False: "ok", name="f")
    bare.add(lambda: "skip", name="skipped")
    assert [bare.call("f"), bare.call("f"), bare.call("skipped")] == ["ok", "ok", "skip"]
    assert prepared == ["f", "skipped"]  # once per tool, not per call
    assert seen == [("f", "F"), ("f", "F")]
    assert bare.plugins.plan.for_tool(bare.get("skipped")).pre_call == ()
    with pytest.raises(PluginError, match="plugin 'prepared'") as broken:  # its errors are the plugin's
        bare.call("f", {"boom": True})
    assert broken.value.plugin == "prepared" and seen[-1] == ("f", "error")
    with pytest.raises(PluginError, match="plugin 'prepared'"):  # and so are those of the Await it returns
        bare.call("f", {"wait": True})
    plan = bare.plugins.plan
    held = dict(plan.owners)
    for i in range(20):  # a closure per tool: its plugin is known by its code, kept once
        bare.add(lambda: "t", name=f"t{i}")
        bare.call(f"t{i}")
        bare.remove(f"t{i}")
    assert plan.owners == held


def test_a_function_prepared_for_many_tools_stays_theirs_until_the_last_goes(bare: ToolRegistry) -> None:
    from harness_one import Await, per_tool

    class Shared:
        def __init__(self) -> None:
            def post_call(call: Call) -> Any:  # one function for every tool
                return Await(lambda: 1 / 0, lambda: None) if call.arguments.get("wait") else None

            self.post_call = post_call

        @hookimpl
        @per_tool(lambda plugin, tool: plugin.post_call)
        def harness_post_call(self, call: Call) -> Any:
            return self.post_call(call)

    bare.plugins.register(Shared(), name="shared")
    for name in ("a", "b"):
        bare.add(lambda wait=False: "ok", name=name)
        assert bare.call(name) == "ok"
    bare.remove("a")
    with pytest.raises(PluginError, match="plugin 'shared'"):  # still named after the other tool left
        bare.call("b", {"wait": True})


def test_a_prepared_partial_fails_as_its_plugins(bare: ToolRegistry) -> None:
    """A ``per_tool`` function built with ``functools.partial`` is the plugin's: its fault names it ("a plugin")."""
    import functools

    from harness_one import per_tool

    class Partial:
        def check(self, limit: int, call: Call) -> None:
            raise ValueError(f"over {limit}")

        @hookimpl
        @per_tool(lambda plugin, tool: functools.partial(plugin.check, 1))
        def harness_pre_call(self, call: Call) -> None:
            self.check(1, call)

    bare.plugins.register(Partial(), name="partial")
    bare.add(lambda: "ok", name="f")
    with pytest.raises(PluginError, match="Internal error in plugin 'partial'") as err:
        bare.call("f")
    assert err.value.plugin == "partial"


def test_keyed_hooks_run_only_for_calls_with_an_idempotency_key() -> None:
    from harness_one import applies_to

    seen: list[str | None] = []

    class Keyed:
        @hookimpl
        @applies_to(keyed=True)
        def harness_pre_call(self, call: Call) -> None:
            seen.append(call.idempotency_key)

    reg = ToolRegistry(autoload=False, standard_plugins=False, plugins={"keyed": Keyed()})
    reg.add(lambda: "ok", name="f")
    assert reg.call("f") == "ok" and reg.call("f", idempotency_key="k1") == "ok"
    assert seen == ["k1"]
    plan = reg.plugins.plan.for_tool(reg.get("f"))
    assert plan.pre_call == () and plan.keyed is not None and len(plan.keyed.pre_call) == 1
    std = ToolRegistry(autoload=False)
    std.add(lambda: "ok", name="g", idempotent=True)
    light = std.plugins.plan.for_tool(std.get("g"))
    assert light.keyed is not None
    assert len(light.keyed.pre_call) > len(light.pre_call)  # the idempotency plugin's hooks are keyed


def test_a_prepared_function_taking_fewer_arguments_is_still_its_plugins(bare: ToolRegistry) -> None:
    from harness_one import per_tool

    def boom() -> None:
        raise KeyError("no arguments taken")

    class First:
        @hookimpl
        @per_tool(lambda plugin, tool: lambda: None)
        def harness_pre_call(self) -> None: ...

    class Second:
        @hookimpl
        @per_tool(lambda plugin, tool: boom)
        def harness_pre_call(self) -> None: ...

    bare.plugins.register(Second(), name="second")
    bare.plugins.register(First(), name="first")  # newest first in the plan; its adapter's code is the second's too
    bare.add(lambda: "ok", name="f")
    with pytest.raises(PluginError, match="plugin 'second'") as broken:
        bare.call("f")
    assert broken.value.plugin == "second"


class Refusals:
    """Records what ``harness_call_refused`` observes."""

    def __init__(self, fail: bool = False) -> None:
        self.seen: list[tuple[str, str, str | None]] = []
        self.fail = fail

    @hookimpl
    def harness_call_refused(self, registry: ToolRegistry, name: str, error: ToolError) -> None:
        self.seen.append((name, type(error).__name__, error.call_id))
        if self.fail:
            raise RuntimeError("observer broke")


def test_requests_refused_before_they_are_calls_are_observed() -> None:
    """An unknown tool, a bad context, key or call id, an async tool without await in a loop, a
    malformed provider call: no Call, so no per-call hook saw them (nothing logged, counted or traced)."""
    import asyncio

    from harness_one.dispatch import dispatch

    broken, seen = Refusals(fail=True), Refusals()
    reg = ToolRegistry(plugins={"broken": broken, "seen": seen}, autoload=False)
    reg.add(lambda: 1, name="one")

    async def later() -> int:
        return 2

    reg.add(later)
    with pytest.raises(ToolNotFound) as raised:
        reg.call("delete_all_users", call_id="c-1")
    assert raised.value.call_id == "c-1"
    assert not reg.try_call("nope").ok
    assert isinstance(reg.try_call("one", context=[1]).error, ToolArgumentError)
    assert isinstance(reg.try_call("one", idempotency_key="").error, ToolArgumentError)
    assert isinstance(reg.try_call("one", call_id=10**5000).error, ToolArgumentError)

    async def in_a_loop() -> None:
        with pytest.raises(ToolError, match="event loop is running"):
            reg.call("later")
        assert isinstance((await reg.atry_call("gone")).error, ToolNotFound)

    asyncio.run(in_a_loop())
    dispatch(reg, [{"id": "x", "type": "function", "function": {"arguments": "{}"}}])  # no name
    with pytest.raises(ToolNotFound):
        reg.get("missing")  # a lookup, not a call
    kinds = [(name, kind) for name, kind, _ in seen.seen]
    assert kinds == [
        ("delete_all_users", "ToolNotFound"),
        ("nope", "ToolNotFound"),
        ("one", "ToolArgumentError"),
        ("one", "ToolArgumentError"),
        ("one", "ToolArgumentError"),
        ("later", "ToolError"),
        ("gone", "ToolNotFound"),
        ("", "ToolError"),
    ]
    assert seen.seen[0][2] == "c-1" and all(call_id for _, _, call_id in seen.seen)
    assert len(broken.seen) == len(seen.seen)  # a failing observer neither stops the next nor replaces the error


def test_the_metrics_plugin_counts_refused_requests_by_type() -> None:
    from harness_one_plugins import MetricsPlugin

    reg = ToolRegistry(plugins={"metrics": MetricsPlugin()}, standard_plugins=False, autoload=False)
    reg.add(lambda: 1, name="one")
    assert "metrics" not in reg.stats()  # nothing refused yet: nothing of its own to show
    for name in ("a", "b", "c"):
        reg.try_call(name)
    reg.try_call("one", context=[])
    assert reg.stats()["metrics"]["refused"] == {"ToolNotFound": 3, "ToolArgumentError": 1}
    assert set(reg.stats()["tools"]) == {"one"}  # no entry per made-up name


def test_a_decision_beside_a_failing_on_error_hook_is_the_plugins_error_for_the_hooks_acting_on_it(bare: ToolRegistry) -> None:
    """One hook answers Retry, another raises: the call fails with the PluginError, and the hooks that act on
    the decision (``after_decision``: the span, the metrics) see that failure, not a retry that never comes."""
    from harness_one import applies_to

    seen: list[Any] = []

    class Retries:
        @hookimpl(tryfirst=True)
        def harness_on_error(self) -> Retry:
            return Retry(0)

    class Breaks:
        @hookimpl
        def harness_on_error(self) -> None:
            raise RuntimeError("broken")

    class ActsOnDecision:
        @hookimpl
        @applies_to(after_decision=True)
        def harness_on_error(self, call: Call) -> None:
            seen.append(call.decision)

    for name, plugin in (("retries", Retries()), ("breaks", Breaks()), ("acts", ActsOnDecision())):
        bare.plugins.register(plugin, name=name)
    bare.add(lambda: 1 / 0, name="boom")
    result = bare.try_call("boom")
    assert not result.ok and isinstance(result.error, PluginError) and result.attempts == 1
    [decision] = seen
    assert type(decision) is Outcome and isinstance(decision.error, PluginError)
