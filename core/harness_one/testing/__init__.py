"""The conformance kit: abstract pytest suites that tool packages, plugins and backends subclass.

Needs pytest (``import harness_one`` never imports this package). Subclass a suite in a
test module and fill in what it asks for::

    from harness_one.testing import PluginTests, ToolPackageTests

    class TestMyTools(ToolPackageTests):
        distribution = "my-tools"

    class TestMyPlugin(PluginTests):
        plugin_factory = MyPlugin

Every suite carries an override guard (``test_no_overrides_DO_NOT_OVERRIDE``): a standard
test overridden or deleted without ``@pytest.mark.xfail(reason=...)``, or a helper the checks
rely on overridden, fails the suite.
Capability flags (``has_side_effects``, ``supports_strict``, ``supports_async``, ...) switch
checks off explicitly. See ``docs/conformance.md``.
"""

from ._contracts import (
    BudgetStoreContract,
    CircuitStoreContract,
    ConcurrencySlotsContract,
    IdempotencyStoreContract,
    RateLimitBackendContract,
    RateLimitPluginContract,
    ValidationPluginContract,
)
from ._plugins import PluginTests, footprint
from ._suite import GUARD, Suite
from ._tools import EXAMPLE_KEYS, PROVIDER_NAMES, ToolPackageTests

__all__ = [
    "EXAMPLE_KEYS",
    "GUARD",
    "PROVIDER_NAMES",
    "BudgetStoreContract",
    "CircuitStoreContract",
    "ConcurrencySlotsContract",
    "IdempotencyStoreContract",
    "PluginTests",
    "RateLimitBackendContract",
    "RateLimitPluginContract",
    "Suite",
    "ToolPackageTests",
    "ValidationPluginContract",
    "footprint",
]
