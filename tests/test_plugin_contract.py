"""The plugin contract: independent standard plugins, options by name, declared fields, one ordering rule."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import harness_one
from harness_one import (
    Call,
    IdempotencyKeyMismatch,
    Outcome,
    PluginError,
    Retry,
    ThreadRunner,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    applies_to,
    define_tool,
    hookimpl,
)
from harness_one._entrypoints import PLUGIN_GROUP, entry_points

ROOT = Path(__file__).resolve().parents[1]
STANDARD = {
    "validation": "validation",
    "rate_limit": "ratelimit",
    "logging": "log",
    "metrics": "metrics",
    "timeout": "timeout",
    "retry": "retry",
    "idempotency": "idempotency",
    "concurrency": "concurrency",
    "circuit_breaker": "circuit",
    "cache": "cache",
    "budget": "budget",
    "approval": "approval",
    "output_limit": "output",
    "otel": "otel",
}


@pytest.fixture
def without_module() -> Iterator[Any]:
    """Make one standard plugin module unimportable (as if deleted), with the others re-imported fresh."""
    import harness_one_plugins  # noqa: F401 - imported (as every other test file has it) so that it can be put back

    saved = {k: v for k, v in sys.modules.items() if k.startswith("harness_one_plugins")}

    def hide(module: str) -> None:
        for name in [k for k in sys.modules if k.startswith("harness_one_plugins.")]:
            del sys.modules[name]
        sys.modules[f"harness_one_plugins.{module}"] = None  # type: ignore[assignment]
        harness_one.refresh_entry_points()

    try:
        yield hide
    finally:
        for name in [k for k in sys.modules if k.startswith("harness_one_plugins")]:
            del sys.modules[name]
        sys.modules.update(saved)
        package = saved["harness_one_plugins"]
        for name, module in saved.items():  # the package's attributes too: `import harness_one_plugins.otel as m` reads them
            if name.count(".") == 1:
                setattr(package, name.partition(".")[2], module)
        harness_one.refresh_entry_points()


def _exercise(registry: ToolRegistry) -> None:
    registry.add(
        lambda a, b: a + b,
        name="add",
        parameters={"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
        rate_limit={"rate": 100, "burst": 100},
        timeout=5,
        retry=2,
        max_concurrency=4,
        circuit_breaker=True,
        idempotent=True,
        cache_ttl=60,
    )
    assert registry.call("add", {"a": 2, "b": 3}) == 5
    keyed = registry.try_call("add", {"a": 2, "b": 3}, idempotency_key="k")
    if "idempotency" in registry.plugins:
        assert keyed.value == 5
    else:  # a key that nothing honours could run twice: refused, as guarded options are
        assert isinstance(keyed.error, PluginError) and "no plugin in this registry honours one" in keyed.error.message
    assert registry.try_call("add", {"a": 2}).ok is False


def test_the_standard_plugins_are_exactly_the_entry_points() -> None:
    own = {ep.name: ep.value for ep in entry_points(PLUGIN_GROUP) if ep.is_own}
    assert set(own) == set(STANDARD)
    assert all(value.startswith(f"harness_one_plugins.{STANDARD[name]}:") for name, value in own.items())


@pytest.mark.parametrize("name", sorted(STANDARD))
def test_each_module_can_go_missing_and_the_other_nine_work(name: str, without_module: Any) -> None:
    without_module(STANDARD[name])
    registry = ToolRegistry(autoload=False)
    assert set(registry.plugins.names()) == set(STANDARD) - {name}
    assert [f.name for f in registry.plugins.failures] == [name]
    _exercise(registry)


@pytest.mark.parametrize("name", sorted(STANDARD))
def test_each_plugin_can_be_blocked_and_the_other_nine_work(name: str) -> None:
    registry = ToolRegistry(autoload=False, block=[name])
    assert set(registry.plugins.names()) == set(STANDARD) - {name}
    assert registry.plugins.failures == []
    _exercise(registry)


def test_no_standard_plugin_imports_another_or_a_private_core_module() -> None:
    for path in (ROOT / "plugins" / "harness_one_plugins").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:  # only a private helper module of the package, never another plugin
                    targets = [module] if module else [a.name for a in node.names]
                    assert all(t.startswith("_") for t in targets), f"{path.name} imports .{targets}"
                assert not module.startswith("harness_one._"), f"{path.name} imports the private {module}"
                assert not module.startswith("harness_one_plugins"), f"{path.name} imports {module}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith(("harness_one_plugins", "harness_one._")) for a in node.names), path.name


def test_core_never_names_the_standard_plugins_package() -> None:
    offenders = []
    for path in (ROOT / "core").rglob("*.py"):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value] if node.value.startswith("harness_one_plugins") else []
            if any(n.startswith("harness_one_plugins") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


# ---------------------------------------------------------------------------- options by name


class Greeter:
    """A third-party plugin configured like a standard one: its factory takes the options."""

    name = "greeter"

    def __init__(self, *, greeting: str = "hello", times: int = 1) -> None:
        self.greeting = greeting
        self.times = times

    @hookimpl
    def harness_post_call(self, call: Call) -> None:
        call.result = f"{self.greeting * self.times} {call.result}"


PLUGIN_MODULE = """
from test_plugin_contract import Greeter
"""


def test_options_reach_entry_point_factories_standard_and_third_party(dists: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    dists.make(
        "hx-greeter",
        {"hx_greeter": "from test_plugin_contract import Greeter\n"},
        {PLUGIN_GROUP: {"greeter": "hx_greeter:Greeter"}},
    )
    registry = ToolRegistry(plugin_options={"greeter": {"greeting": "hi"}, "rate_limit": {"default": {"rate": 1, "burst": 1}}})
    registry.add(lambda: "there", name="f")
    assert registry.call("f") == "hi there"
    assert registry.try_call("f").error.kind == "rate_limited"  # the default limit for tools without one
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_GREETER", '{"times": 2}')
    from_env = ToolRegistry(plugin_options={"greeter": {"greeting": "yo"}})
    from_env.add(lambda: "!", name="f")
    assert from_env.call("f") == "yoyo !"  # the environment, then the argument on top
    assert from_env.plugins.options["greeter"] == {"times": 2, "greeting": "yo"}


def test_options_a_plugin_refuses_are_an_error_naming_the_closest_option(dists: Any) -> None:
    """A misspelt option was a load failure (a warning): ``[plugins.rate_limit] defualt = ...`` left every call unlimited."""
    with pytest.raises(PluginError) as err:
        ToolRegistry(autoload=False, plugin_options={"rate_limit": {"defualt": {"rate": 1, "burst": 1}}})
    assert err.value.plugin == "rate_limit" and isinstance(err.value.__cause__, TypeError)
    assert "options ['defualt']" in err.value.message and "did you mean 'default'?" in err.value.message
    assert "It takes: backend, clock, default, max_wait, on_state_error." in err.value.message
    assert "HARNESS_ONE_PLUGIN_RATE_LIMIT" in err.value.message  # where options come from
    with pytest.raises(PluginError, match=r"'retry'.*attempts_typo"):
        ToolRegistry(autoload=False, plugin_options={"retry": {"attempts_typo": 3}})


def test_options_reach_a_plugin_class_given_by_name_and_are_refused_for_an_object(monkeypatch: pytest.MonkeyPatch) -> None:
    """``plugins={"audit": Audit}`` with ``plugin_options={"audit": ...}``: the options were dropped unread."""

    class Audit:
        def __init__(self, role_key: str = "role") -> None:
            self.role_key = role_key

    registry = ToolRegistry(plugins={"audit": Audit}, autoload=False, plugin_options={"audit": {"role_key": "group"}})
    assert registry.plugins.get("audit").role_key == "group"
    with pytest.raises(PluginError, match=r"options \['rolekey'\].*did you mean 'role_key'\?"):
        ToolRegistry(plugins={"audit": Audit}, autoload=False, plugin_options={"audit": {"rolekey": "group"}})
    with pytest.raises(PluginError, match="given as an object, already built: give its class"):
        ToolRegistry(plugins={"audit": Audit()}, autoload=False, plugin_options={"audit": {"role_key": "group"}})
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_AUDIT", '{"role_key": "team"}')
    assert ToolRegistry(plugins={"audit": Audit}, autoload=False).plugins.get("audit").role_key == "team"


def test_an_allow_list_naming_no_installed_plugin_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """``HARNESS_ONE_PLUGINS=validaton,rate_limit`` loaded rate_limit only: arguments went unchecked, no word said."""
    with pytest.raises(
        PluginError, match=r"the allow-list names plugin 'validaton', which is not installed; did you mean 'validation'\?"
    ):
        ToolRegistry(allow=["validaton", "rate_limit"])
    monkeypatch.setenv("HARNESS_ONE_PLUGINS", "validaton,rate_limit")
    with pytest.raises(PluginError, match=r"^HARNESS_ONE_PLUGINS names plugin 'validaton'"):
        ToolRegistry()
    assert ToolRegistry(allow=["validation"]).plugins.names() == ["validation"]


def test_a_block_list_or_options_variable_naming_no_installed_plugin_is_a_load_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """``block = ["cahce"]`` and ``HARNESS_ONE_PLUGIN_RATE_LIMT`` were ignored without a word."""
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_RATE_LIMT", '{"max_wait": 2}')
    registry = ToolRegistry(block=["cahce"])
    assert [(f.name, f.distribution) for f in registry.plugins.failures] == [
        ("cahce", "the configuration"),
        ("HARNESS_ONE_PLUGIN_RATE_LIMT", "the configuration"),
    ]
    assert "did you mean 'cache'?" in registry.plugins.failures[0].error
    assert "did you mean 'HARNESS_ONE_PLUGIN_RATE_LIMIT'?" in registry.plugins.failures[1].error
    assert "cache" in registry.plugins.names() and "rate_limit" in registry.plugins.names()  # the rest as before
    with pytest.raises(PluginError, match="'cahce'"):
        ToolRegistry(block=["cahce"], strict=True)


def test_options_for_a_name_no_plugin_has_are_a_load_failure(dists: Any) -> None:
    """A typo in ``[plugins.rate_limt]`` was ignored silently: the limit it meant to set never applied."""
    registry = ToolRegistry(autoload=False, plugin_options={"rate_limt": {"max_wait": 2}})
    [failed] = registry.plugins.failures
    assert failed.name == "rate_limt" and failed.distribution == "the configuration"
    assert "no plugin has that name; did you mean 'rate_limit'?" in failed.error and "['max_wait']" in failed.error
    assert "rate_limit" in registry.plugins.names()  # the rest loads as before
    with pytest.raises(PluginError, match=r"'rate_limt'.*did you mean 'rate_limit'"):
        ToolRegistry(autoload=False, strict=True, plugin_options={"rate_limt": {"max_wait": 2}})


def test_options_for_an_installed_plugin_left_out_are_not_a_failure(dists: Any) -> None:
    """Blocked, not allowed, not autoloaded or given as an object: the configuration is shared, not wrong."""
    dists.make(
        "hx-greeter",
        {"hx_greeter": "from test_plugin_contract import Greeter\n"},
        {PLUGIN_GROUP: {"greeter": "hx_greeter:Greeter"}},
    )
    options = {"greeter": {"greeting": "hi"}, "retry": {"not_an_option": 2}}  # never built: never checked
    left_out = [
        ToolRegistry(autoload=False, strict=True, plugin_options={"greeter": {"greeting": "hi"}}),
        ToolRegistry(block=["greeter", "retry"], strict=True, plugin_options=options),
        ToolRegistry(allow=["validation"], strict=True, plugin_options=options),
        ToolRegistry(plugins={"hello": Greeter()}, autoload=False, strict=True, plugin_options={"hello": {}}),
    ]
    assert [r.plugins.failures for r in left_out] == [[]] * len(left_out)


@pytest.mark.parametrize(
    ("plugin", "options", "message"),
    [
        ("rate_limit", {"max_wait": "abc"}, "rate_limit max_wait must be a non-negative number of seconds, not 'abc'"),
        ("timeout", {"default": "abc"}, "timeout default must be a positive number of seconds or None, not 'abc'"),
        ("timeout", {"max_workers": 0}, "timeout max_workers must be a positive integer, not 0"),
        ("concurrency", {"default": "x"}, "concurrency default must be a positive integer or None, not 'x'"),
        ("concurrency", {"lease": -1}, "concurrency lease must be a positive number of seconds, not -1"),
        ("budget", {"ttl": 0}, "budget ttl must be a positive number of seconds, not 0"),
    ],
)
def test_standard_options_of_the_wrong_type_are_an_error(plugin: str, options: dict[str, Any], message: str) -> None:
    """Not a plugin that loads and then fails every call with an internal error, nor one left out."""
    with pytest.raises(PluginError) as err:
        ToolRegistry(autoload=False, plugin_options={plugin: options})
    assert err.value.plugin == plugin and message in err.value.message and "It takes" not in err.value.message


def test_a_plugin_that_exits_at_import_is_a_load_failure(dists: Any) -> None:
    dists.make("hx-exits", {"hx_exits": "raise SystemExit(3)\n"}, {PLUGIN_GROUP: {"exits": "hx_exits:Plugin"}})
    registry = ToolRegistry()
    assert [f.name for f in registry.plugins.failures] == ["exits"] and "SystemExit" in registry.plugins.failures[0].error
    assert "validation" in registry.plugins.names()


# ---------------------------------------------------------------------------- declared fields


def test_the_decision_is_declared_and_seen_by_later_implementations(bare: ToolRegistry, clock: Any) -> None:
    bare.clock = clock
    seen: list[Any] = []

    class Decider:
        order = 1

        @hookimpl
        def harness_on_error(self, call: Call) -> Retry | None:
            return Retry(0.25) if call.attempt == 1 else None

    class Observer:
        order = 2

        @hookimpl
        def harness_on_error(self, call: Call) -> None:
            seen.append(call.decision)

    bare.plugins.register(Observer(), name="observer")
    bare.plugins.register(Decider(), name="decider")
    bare.add(lambda: 1 / 0, name="boom")
    with pytest.raises(ToolExecutionError):
        bare.call("boom")
    assert seen == [Retry(0.25), None]
    assert clock.sleeps == [0.25]


def test_a_replayed_error_is_marked_and_never_retried(registry: ToolRegistry) -> None:
    runs: list[int] = []

    @define_tool(registry=registry, idempotent=True, retry={"attempts": 3, "on": [OSError], "initial": 0})
    def flaky(n: int) -> int:
        runs.append(n)
        raise OSError("down")

    first = registry.try_call("flaky", {"n": 1}, idempotency_key="k1")
    assert first.error is not None and first.attempts == 3 and not first.error.replayed
    replay = registry.try_call("flaky", {"n": 1}, idempotency_key="k1")
    assert replay.error is not None and replay.error.replayed and type(replay.error) is ToolExecutionError
    assert replay.error.message == first.error.message and replay.attempts == 1
    assert runs == [1, 1, 1]
    with pytest.raises(IdempotencyKeyMismatch):
        registry.call("flaky", {"n": 2}, idempotency_key="k1")


def test_timeout_and_runner_are_per_attempt_fields_any_plugin_may_set(bare: ToolRegistry) -> None:
    threads = ThreadRunner(2)
    seen: list[tuple[int, Any]] = []

    class Bound:
        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            seen.append((call.attempt, call.timeout))  # cleared before each attempt
            if call.attempt == 1:
                call.timeout, call.runner = 0.05, threads

        @hookimpl
        def harness_on_error(self, call: Call, error: BaseException) -> Retry | None:
            return Retry(0) if isinstance(error, ToolTimeout) else None

    bare.plugins.register(Bound(), name="bound")

    def slow(call: Call) -> str:
        if call.attempt == 1:
            import time

            time.sleep(0.5)
        return "done"

    bare.add(slow)
    assert bare.call("slow") == "done"
    assert seen == [(1, None), (2, None)]
    threads.shutdown()


# ---------------------------------------------------------------------------- one ordering rule


def _recorder(log: list[str], tag: str, order: int | None = None, **marks: bool) -> Any:
    class Plugin:
        @hookimpl(**marks)
        def harness_pre_call(self) -> None:
            log.append(tag)

    plugin = Plugin()
    if order is not None:
        plugin.order = order  # type: ignore[attr-defined]
    return plugin


def test_one_ordering_rule_tier_then_order_then_newest(bare: ToolRegistry) -> None:
    log: list[str] = []
    bare.plugins.register(_recorder(log, "last", trylast=True, order=-100), name="last")
    bare.plugins.register(_recorder(log, "o5", 5), name="o5")
    bare.plugins.register(_recorder(log, "first", tryfirst=True, order=100), name="first")
    bare.plugins.register(_recorder(log, "o0-old"), name="o0-old")
    bare.plugins.register(_recorder(log, "o-5", -5), name="o-5")
    bare.plugins.register(_recorder(log, "o0-new"), name="o0-new")
    bare.add(lambda: 1, name="f")
    bare.call("f")
    assert log == ["first", "o-5", "o0-new", "o0-old", "o5", "last"]
    assert list(bare.plugins.plan.order["pre_call"]) == log
    bare.plugins.replace("o0-old", _recorder(log, "o0-replaced"))  # a replacement is the newest of its order
    log.clear()
    bare.call("f")
    assert log == ["first", "o-5", "o0-replaced", "o0-new", "o5", "last"]


def test_standard_order_is_documented_order(registry: ToolRegistry) -> None:
    order = registry.plugins.plan.order
    assert order["pre_call"] == (
        "idempotency", "budget", "approval", "cache", "rate_limit", "timeout", "retry", "circuit_breaker", "concurrency", "otel"
    )  # fmt: skip
    assert order["pre_validate"] == ("otel", "timeout", "validation")
    # metrics and logging last; then the after-decision hooks, which run after every other (output_limit's, and
    # otel's, metrics' and logging's, which record the decision once final), as they run
    assert order["on_error"][0] == "rate_limit" and order["on_error"][-6:] == (
        "metrics", "logging", "output_limit", "otel", "metrics", "logging"
    )  # fmt: skip


def test_applies_to_holds_for_every_implementation_and_wrappers_are_refused(bare: ToolRegistry) -> None:
    log: list[str] = []

    class OnlyTagged:
        @hookimpl
        @applies_to(lambda plugin, tool: "tagged" in tool.tags)
        def harness_pre_validate(self, call: Call) -> None:
            log.append(f"pre_validate:{call.tool.name}")

        @hookimpl(tryfirst=True)
        @applies_to(lambda plugin, tool: "tagged" in tool.tags)
        def harness_pre_call(self, call: Call) -> None:
            log.append(f"pre_call:{call.tool.name}")

        @hookimpl(trylast=True)
        @applies_to(lambda plugin, tool: "tagged" in tool.tags)
        def harness_post_call(self, call: Call) -> None:
            log.append(f"post_call:{call.tool.name}")

    class Wrapper:
        @hookimpl(wrapper=True)
        def harness_pre_call(self, call: Call) -> Iterator[None]:
            return (yield)

    bare.plugins.register(OnlyTagged(), name="tagged")
    with pytest.raises(PluginError, match="cannot be wrappers"):
        bare.plugins.register(Wrapper(), name="wrapper")
    bare.add(lambda: 1, name="plain")
    bare.add(lambda: 2, name="marked", tags=["tagged"])
    assert (bare.call("plain"), bare.call("marked")) == (1, 2)
    assert log == ["pre_validate:marked", "pre_call:marked", "post_call:marked"]


def test_coroutine_hooks_and_unknown_hooks_are_refused(bare: ToolRegistry) -> None:
    class Async:
        @hookimpl
        async def harness_pre_call(self, call: Call) -> None: ...

    class Typo:
        @hookimpl
        def harness_pre_cal(self, call: Call) -> None: ...

    with pytest.raises(PluginError, match="coroutine"):
        bare.plugins.register(Async(), name="async")
    with pytest.raises(PluginError, match="harness_pre_cal"):
        bare.plugins.register(Typo(), name="typo")
    assert bare.plugins.names() == []


def test_a_raising_on_error_hook_is_a_plugin_error_and_the_others_still_run(bare: ToolRegistry) -> None:
    ran: list[str] = []

    class Broken:
        order = 1

        @hookimpl
        def harness_on_error(self) -> None:
            raise KeyError("oops")

    class Cleanup:
        order = 2

        @hookimpl
        def harness_on_error(self) -> None:
            ran.append("cleanup")

    bare.plugins.register(Broken(), name="broken")
    bare.plugins.register(Cleanup(), name="cleanup")
    bare.add(lambda: 1 / 0, name="boom")
    result = bare.try_call("boom")
    assert isinstance(result.error, PluginError) and result.error.plugin == "broken" and "KeyError" in result.error.message
    assert ran == ["cleanup"]


# ---------------------------------------------------------------------------- code beats packages


@pytest.mark.parametrize("listed_first", [False, True], ids=["defined-before-listing", "defined-after-listing"])
def test_code_beats_an_installed_package_in_either_order(fresh_default: ToolRegistry, listed_first: bool) -> None:
    """The harness-one-sql-query package is installed; the seed's own sql_query example still defines its tool."""
    registry = ToolRegistry(discover=True, autoload=False)
    ToolRegistry.set_default(registry)
    if listed_first:
        ToolRegistry.list_tools()
        assert ToolRegistry.get("sql_query").source == "harness-one-sql-query"

    @harness_one.defineTool(
        name="sql_query",
        description="Run a read-only SQL query",
        parameters={"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
        timeout=10,
        idempotent=True,
    )
    def sql_query(sql: str) -> str:
        return "from code"

    assert ToolRegistry.call("sql_query", {"sql": "SELECT 1"}) == "from code"
    assert "sql_query" in ToolRegistry.list_tools() and ToolRegistry.get("sql_query").source is None
    conflicts = [(c.name, c.kept, c.skipped) for c in registry.discovery.conflicts]
    assert conflicts == [("sql_query", "code in this process", "harness-one-sql-query")]


def test_two_code_tools_of_one_name_stay_an_error(bare: ToolRegistry) -> None:
    bare.add(lambda: 1, name="twice")
    with pytest.raises(ToolDefinitionError, match="already registered"):
        bare.add(lambda: 2, name="twice")


def test_call_counts_are_exact_and_reading_them_changes_nothing(bare: ToolRegistry) -> None:
    bare.add(lambda: 1, name="f")
    for _ in range(5):
        bare.call("f")
    assert [bare.call_count("f") for _ in range(3)] == [5, 5, 5]
    bare.try_call("f", {"unexpected": 1})
    assert bare.call_count("f") == 6 and bare.stats()["tools"]["f"]["calls"] == 6


def test_outcome_failure_from_pre_call_is_the_error(bare: ToolRegistry) -> None:
    class Deny:
        @hookimpl
        def harness_pre_call(self) -> Outcome:
            return Outcome.failure(ToolError("denied by policy"))

    bare.plugins.register(Deny(), name="deny")
    bare.add(lambda: 1, name="f")
    with pytest.raises(ToolError, match="denied by policy"):
        bare.call("f")


def test_a_plugin_failing_for_its_environment_with_options_set_is_a_load_failure(dists: Any) -> None:
    dists.make(
        "hx-needs",
        {
            "hx_needs": "class Needs:\n    def __init__(self, enabled=False):\n        raise ImportError('needs a package that is not installed')\n"
        },
        {PLUGIN_GROUP: {"needs": "hx_needs:Needs"}},
    )
    registry = ToolRegistry(plugin_options={"needs": {"enabled": True}})
    assert [(f.name, "ImportError" in f.error) for f in registry.plugins.failures] == [("needs", True)]
    assert "validation" in registry.plugins.names()


def test_environment_options_leave_a_plugin_given_as_an_object_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The conformance kit registers the plugin it checks as an object: HARNESS_ONE_PLUGIN_RATE_LIMIT failed every check."""
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_RATE_LIMIT", '{"default": {"rate": 100, "burst": 100}}')
    from harness_one_plugins import RateLimitPlugin

    mine = RateLimitPlugin()
    registry = ToolRegistry(plugins={"rate_limit": mine}, autoload=False)
    assert registry.plugins.get("rate_limit") is mine and registry.plugins.failures == []


def test_a_plugin_given_in_a_list_is_known_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    class Audit:
        name = "audit"

        def __init__(self, level: int = 0) -> None:
            self.level = level

    monkeypatch.setenv("HARNESS_ONE_PLUGIN_AUDIT", '{"level": 3}')
    registry = ToolRegistry(plugins=[Audit], autoload=False, strict=True)
    assert registry.plugins.get("audit").level == 3 and registry.plugins.failures == []
    assert "audit" in ToolRegistry(plugins=[Audit()], allow=["validation", "audit"]).plugins.names()


def test_a_plugin_whose_client_chains_the_os_error_it_met_is_a_load_failure(dists: Any) -> None:
    """A client's ConnectionError that is no OSError (redis-py's, httpx's) raised from the OSError it met: a server
    that does not answer is the plugin's environment, not its options."""
    dists.make(
        "hx-down",
        {
            "hx_down": (
                "class ConnectionError(Exception):\n    pass\n\n"
                "class Down:\n    def __init__(self, url=''):\n"
                "        try:\n            raise ConnectionRefusedError(111, 'Connection refused')\n"
                "        except OSError as exc:\n            raise ConnectionError(f'cannot reach {url}') from exc\n"
            )
        },
        {PLUGIN_GROUP: {"down": "hx_down:Down"}},
    )
    registry = ToolRegistry(plugin_options={"down": {"url": "redis://127.0.0.1:1"}})
    assert [(f.name, "cannot reach" in f.error) for f in registry.plugins.failures] == [("down", True)]
    assert "validation" in registry.plugins.names()
