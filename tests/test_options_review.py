"""Options and policy values the review found accepted and failing later (or dropping a plugin).

Seconds that never end, a Retry wait past what ``time.sleep`` takes, policy values of the wrong
type, a plugin ``order`` that is not a number, and options that made a plugin's factory fail with
an ``AttributeError`` (a load failure: the registry ran without the plugin).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from harness_one import (
    Call,
    CircuitBreakerPolicy,
    ManualClock,
    PluginError,
    RateLimitExceeded,
    Retry,
    RetryPolicy,
    ToolDefinitionError,
    ToolError,
    ToolRegistry,
    hookimpl,
)
from harness_one._redact import Redactor
from harness_one_plugins._options import seconds

# ------------------------------------------------------------------ seconds options


@pytest.mark.parametrize(
    ("plugin", "option", "value", "message"),
    [
        ("rate_limit", "max_wait", math.inf, "rate_limit max_wait must be a finite number of seconds, not inf"),
        ("idempotency", "poll", math.inf, "idempotency poll must be a finite number of seconds, not inf"),
        ("idempotency", "lease", math.inf, "idempotency lease must be a finite number of seconds, not inf"),
        ("idempotency", "ttl", math.inf, "idempotency ttl must be a finite number of seconds, not inf"),
        (
            "idempotency",
            "ttl",
            10**400,
            "idempotency ttl must be a finite number of seconds, not an integer past a float's range",
        ),
        ("timeout", "default", math.inf, "timeout default must be a finite number of seconds or None, not inf"),
        ("rate_limit", "max_wait", math.nan, "rate_limit max_wait must be a non-negative number of seconds, not nan"),
    ],
)
def test_an_infinite_seconds_option_is_refused_naming_it(plugin: str, option: str, value: Any, message: str) -> None:
    """``max_wait=inf`` made a rate-limited call wait forever (a tool's own ``max_wait=inf`` is refused);
    ``poll=inf`` told the model ``retry_after: "Infinity"``; ``ttl``/``lease=inf`` broke Redis."""
    with pytest.raises(PluginError) as err:
        ToolRegistry(autoload=False, plugin_options={plugin: {option: value}})
    assert err.value.plugin == plugin and isinstance(err.value.__cause__, ValueError)
    assert str(err.value.__cause__) == message
    assert message in err.value.message


def test_seconds_takes_a_minimum_and_a_maximum_a_call_site_opts_into() -> None:
    """A lease of 1e-300 s was renewed ~19,556 times in a busy loop, and lapsed under a running call."""
    with pytest.raises(ValueError, match=r"^idempotency lease must be at least 0\.001 seconds, not 1e-300$"):
        seconds(1e-300, "idempotency lease", minimum=0.001)
    assert seconds(0.001, "idempotency lease", minimum=0.001) == 0.001
    assert seconds(0, "idempotency wait", zero=True, minimum=0.001) == 0.0  # 0 stays "do not wait"
    with pytest.raises(ValueError, match=r"^idempotency wait must be at least 0\.001 seconds \(or 0\), not 1e-09$"):
        seconds(1e-9, "idempotency wait", zero=True, minimum=0.001)
    with pytest.raises(ValueError, match=r"^idempotency ttl must be at most 1e\+09 seconds, not 1e\+300$"):
        seconds(1e300, "idempotency ttl", maximum=1e9)
    assert seconds(None, "cache ttl", optional=True, minimum=0.001) is None
    assert seconds(5, "budget ttl") == 5.0 and type(seconds(5, "budget ttl")) is float


# ------------------------------------------------------------------ a Retry wait past time.sleep's range


def test_a_retry_wait_past_time_sleeps_range_is_cut_not_an_internal_error() -> None:
    """rate 1e-10 and max_wait 2e10: the wait of ~1e10 s reached ``time.sleep``, whose OverflowError
    became an untyped "Internal error"; each wait is now cut to 1e9 s and the call goes on."""
    clock = ManualClock()
    registry = ToolRegistry(autoload=False, clock=clock)
    registry.add(lambda: 1, name="u", rate_limit={"rate": 1e-10, "burst": 1, "max_wait": 1e11})
    assert registry.call("u") == 1
    assert registry.call("u") == 1  # waited out, in waits time.sleep takes
    assert clock.sleeps == [1e9] * 10
    # the review's case: the rate limit counts each wait as asked (1e10 s, then 9e9 s...), so its
    # max_wait of 2e10 s runs out first and its refusal stands, typed
    clock = ManualClock()
    registry = ToolRegistry(autoload=False, clock=clock)
    registry.add(lambda: 1, name="u", rate_limit={"rate": 1e-10, "burst": 1, "max_wait": 2e10})
    assert registry.call("u") == 1
    with pytest.raises(RateLimitExceeded) as err:
        registry.call("u")
    assert err.value.retry_after == pytest.approx(8e9) and clock.sleeps == [1e9, 1e9]


class _RetryOnce:
    """Answers the first failure of a call with ``Retry(delay)``."""

    name = "retry_once"

    def __init__(self, delay: float) -> None:
        self.delay = delay

    @hookimpl
    def harness_on_error(self, call: Call, error: ToolError) -> Retry | None:
        return Retry(self.delay) if call.attempt == 1 else None


@pytest.mark.parametrize("delay", [math.inf, 2e10])
def test_a_plugins_retry_wait_is_cut_in_call_and_acall(delay: float) -> None:
    clock = ManualClock()
    registry = ToolRegistry(autoload=False, clock=clock, plugins=[_RetryOnce(delay)])
    runs: list[int] = []

    def flaky() -> str:
        runs.append(1)
        if len(runs) % 2:
            raise OSError("down")
        return "up"

    registry.add(flaky)
    assert registry.call("flaky") == "up"
    assert clock.sleeps == [1e9]
    assert asyncio.run(registry.acall("flaky")) == "up"
    assert clock.sleeps == [1e9, 1e9]


# ------------------------------------------------------------------ policies


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"window": math.inf}, "circuit_breaker window must be a finite positive number, got inf"),
        ({"open_for": math.inf}, "circuit_breaker open_for must be a finite positive number, got inf"),
        ({"failure_ratio": "0.5"}, "circuit_breaker failure_ratio must be a number in (0, 1], got '0.5'"),
        ({"failure_ratio": None}, "circuit_breaker failure_ratio must be a number in (0, 1], got None"),
        ({"failure_ratio": True}, "circuit_breaker failure_ratio must be a number in (0, 1], got True"),
        ({"failure_ratio": math.nan}, "circuit_breaker failure_ratio must be a number in (0, 1], got nan"),
        ({"min_calls": True}, "circuit_breaker min_calls must be an integer >= 1, got True"),
        ({"probes": True}, "circuit_breaker probes must be an integer >= 1, got True"),
        ({"probes": 2.0}, "circuit_breaker probes must be an integer >= 1, got 2.0"),
    ],
)
def test_circuit_breaker_values_are_checked_when_the_tool_is_added(policy: dict[str, Any], message: str) -> None:
    """``window=inf`` made every failure a PluginError (OverflowError in the breaker's trim), hiding the
    tool's own error; ``open_for=inf`` told the model "Retry after inf s"; a string ratio was a TypeError."""
    registry = ToolRegistry(autoload=False)
    with pytest.raises(ToolDefinitionError) as err:
        registry.add(lambda: 1, name="f", circuit_breaker=policy)
    assert err.value.message == f"Tool 'f': {message}."
    with pytest.raises(ToolDefinitionError):
        CircuitBreakerPolicy.parse(policy, tool="f")


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"multiplier": "2"}, "retry multiplier must be a finite number >= 1, got '2'"),
        ({"multiplier": None}, "retry multiplier must be a finite number >= 1, got None"),
        ({"multiplier": math.inf}, "retry multiplier must be a finite number >= 1, got inf"),
        ({"multiplier": 0.5}, "retry multiplier must be a finite number >= 1, got 0.5"),
        ({"timeouts": "false"}, "retry timeouts must be True or False, got 'false'"),
        ({"rerun_non_idempotent": "false"}, "retry rerun_non_idempotent must be True or False, got 'false'"),
    ],
)
def test_retry_values_of_the_wrong_type_are_a_definition_error(policy: dict[str, Any], message: str) -> None:
    """``multiplier="2"`` raised a plain TypeError from add(); ``rerun_non_idempotent="false"`` read as true."""
    registry = ToolRegistry(autoload=False)
    with pytest.raises(ToolDefinitionError) as err:
        registry.add(lambda: 1, name="f", retry=policy)
    assert err.value.message == f"Tool 'f': {message}."


def test_good_policies_still_parse() -> None:
    assert CircuitBreakerPolicy.parse({"failure_ratio": 1, "window": 1e9, "min_calls": 2}, tool="f").window == 1e9
    assert RetryPolicy.parse({"multiplier": 1, "timeouts": True}, tool="f").multiplier == 1
    assert "rerun_non_idempotent" in (RetryPolicy.__doc__ or "")
    assert "unless the call has an idempotency key" not in (RetryPolicy.__doc__ or "")


def test_a_plugin_default_circuit_policy_of_the_wrong_type_is_a_plugin_error() -> None:
    with pytest.raises(PluginError) as err:
        ToolRegistry(autoload=False, plugin_options={"circuit_breaker": {"default": {"failure_ratio": "0.5"}}})
    assert err.value.plugin == "circuit_breaker" and isinstance(err.value.__cause__, ToolDefinitionError)
    assert "failure_ratio must be a number in (0, 1], got '0.5'" in err.value.message


# ------------------------------------------------------------------ plugin order


def _ordered(order: Any) -> Any:
    class Ordered:
        name = "p"

        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            return None

    Ordered.order = order  # type: ignore[attr-defined]
    return Ordered()


@pytest.mark.parametrize("order", ["5", math.inf, -math.inf, math.nan, None, True, [1]])
def test_a_plugin_order_that_is_no_finite_number_is_refused_at_registration(order: Any) -> None:
    """Read as 0, an ``order = math.inf`` meant as "last" ran before the standard plugins."""
    with pytest.raises(PluginError) as err:
        ToolRegistry(autoload=False, plugins={"p": _ordered(order)})
    assert err.value.plugin == "p"
    assert err.value.message == (
        f"Plugin 'p': order must be an int or a finite float (lower runs first; the standard plugins use 10 to 95), "
        f"got {order!r}."
    )
    registry = ToolRegistry(autoload=False)
    with pytest.raises(PluginError, match="order must be an int or a finite float"):
        registry.plugins.register(_ordered(order), name="p")
    assert registry.plugins.get("p") is None


def test_a_function_called_order_is_no_order_and_a_numpy_like_integer_is_one() -> None:
    """A module plugin's helper ``def order(item)`` or a method ``order`` registered before (as order 0): still is;
    an integer of another type (numpy's, registered as a ``numbers.Integral``) sorts as its value."""
    import numbers

    class Int(int):  # stands for numpy.int64: an Integral that is no bool
        pass

    numbers.Integral.register(Int)

    class Shop:
        name = "shop"

        def order(self, item: str) -> str:
            return item

        @hookimpl
        def harness_pre_call(self, call: Call) -> None:
            return None

    plan = ToolRegistry(autoload=False, plugins={"shop": Shop(), "p": _ordered(Int(11))}).plugins.plan.order["pre_call"]
    assert plan.index("shop") < plan.index("rate_limit") < plan.index("p")  # 0 < 10 < 11


def test_a_float_order_sorts_as_a_number() -> None:
    early = ToolRegistry(autoload=False, plugins={"p": _ordered(9.5)}).plugins.plan.order["pre_call"]
    late = ToolRegistry(autoload=False, plugins={"p": _ordered(10**100)}).plugins.plan.order["pre_call"]
    assert early.index("p") == early.index("rate_limit") - 1  # rate_limit's order is 10
    assert late.index("p") == late.index("otel") - 1  # last of the unmarked pre_calls (otel is trylast)


# ------------------------------------------------------------------ options that failed a factory


def test_a_non_string_secret_key_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match=r"^extra secret keys must be strings, not int 4711$"):
        Redactor(extra_keys=["ssn", 4711])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"^secret keys must be strings, not NoneType None$"):
        Redactor([None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"^secret values must be a string or an iterable of strings, not int 5$"):
        Redactor(values=5)  # type: ignore[arg-type]
    assert Redactor(extra_keys="ssn").is_secret("ssn")  # one string is one key


def test_a_non_string_secret_key_in_the_environment_is_a_plugin_error_not_a_dropped_plugin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It was an AttributeError, a load failure: the registry ran without logging, with one warning."""
    monkeypatch.setenv("HARNESS_ONE_PLUGIN_LOGGING", '{"log_arguments": true, "extra_secret_keys": ["ssn", 4711]}')
    with pytest.raises(PluginError) as err:
        ToolRegistry(autoload=False)
    assert err.value.plugin == "logging" and isinstance(err.value.__cause__, TypeError)
    assert err.value.message == (
        "Plugin 'logging' cannot be built with its options ['extra_secret_keys', 'log_arguments']: "
        "TypeError: extra secret keys must be strings, not int 4711 "
        "(the options come from HARNESS_ONE_PLUGIN_LOGGING)"
    )


@pytest.mark.parametrize(("option", "method"), [("tracer_provider", "get_tracer"), ("meter_provider", "get_meter")])
def test_an_otel_provider_without_its_method_is_a_plugin_error(option: str, method: str) -> None:
    with pytest.raises(PluginError) as err:
        ToolRegistry(autoload=False, plugin_options={"otel": {option: "console"}})
    assert err.value.plugin == "otel" and isinstance(err.value.__cause__, TypeError)
    assert f"TypeError: otel {option} must be None or an object with {method}(), not str 'console'" in err.value.message


class _Fragile:
    """A third-party factory that fails on a value it does not check, or for its environment."""

    name = "fragile"

    def __init__(self, *, label: Any = "x", path: str = "") -> None:
        if path:
            raise OSError(f"cannot open {path}")
        self.label = label.upper()

    @hookimpl
    def harness_pre_call(self, call: Call) -> None:
        return None


def test_any_exception_from_a_factory_built_with_options_is_a_plugin_error_naming_where_they_came_from() -> None:
    with pytest.raises(PluginError) as err:
        ToolRegistry(autoload=False, plugins={"fragile": _Fragile}, plugin_options={"fragile": {"label": 5}})
    assert isinstance(err.value.__cause__, AttributeError)
    assert err.value.message == (
        "Plugin 'fragile' cannot be built with its options ['label']: AttributeError: 'int' object has no attribute "
        "'upper' (the options come from plugin_options={'fragile': ...} or the configuration: [plugins.fragile] in "
        "harness-one.toml or a --config file, -O fragile.<option>, or HARNESS_ONE_PLUGIN_FRAGILE)"
    )
    # for its environment (OSError, ImportError): not the options' fault, raised as it was
    with pytest.raises(OSError, match="cannot open /nowhere"):
        ToolRegistry(autoload=False, plugins={"fragile": _Fragile}, plugin_options={"fragile": {"path": "/nowhere"}})


def test_a_refused_timeout_option_names_the_command_lines_origins_too() -> None:
    """It said "[plugins.timeout] in harness-one.toml, or HARNESS_ONE_PLUGIN_TIMEOUT" for ``-O timeout.default=-1``."""
    with pytest.raises(PluginError) as err:
        ToolRegistry(autoload=False, plugin_options={"timeout": {"default": -1}})
    assert err.value.message.endswith(
        "(the options come from plugin_options={'timeout': ...} or the configuration: [plugins.timeout] in "
        "harness-one.toml or a --config file, -O timeout.<option>, or HARNESS_ONE_PLUGIN_TIMEOUT)"
    )


@pytest.mark.parametrize("option", ["poll", "lease"])
def test_a_concurrency_interval_below_a_millisecond_is_refused(option: str) -> None:
    """A 1e-300 s lease would be renewed in a busy loop (and lapse while its call runs): refused, named."""
    from harness_one_plugins.concurrency import ConcurrencyPlugin

    with pytest.raises(ValueError, match=rf"concurrency {option} must be at least 0.001 seconds, not 1e-300"):
        ConcurrencyPlugin(**{option: 1e-300})
