"""One circuit breaker per remote MCP server, shared by all of its tools.

The circuit states live in the registry's circuit store (``registry.state.circuits()``: in
this process, or Redis for several workers) under ``mcp:<server name>``, with the same
:class:`~harness_one.CircuitBreakerPolicy` state machine as the per-tool circuits; only the
key differs. So a dead server opens one circuit, and every tool it brings fails fast.
"""

from __future__ import annotations

import threading
from typing import Any

from harness_one import (
    Call,
    CircuitBreakerPolicy,
    CircuitOpen,
    RetryableError,
    ToolExecutionError,
    ToolRegistry,
    ToolTimeout,
    applies_to,
    hookimpl,
)
from harness_one.state import StateUnavailable

__all__ = ["PLUGIN_NAME", "ServerCircuits", "circuits_for"]

#: The name of the plugin in a registry's plugin set.
PLUGIN_NAME = "harness_one.mcp.circuits"
_PROBE = "mcp_circuit.probe"
_COUNTED = "mcp_circuit.counted"


def _guarded(plugin: ServerCircuits, tool: Any) -> bool:
    return tool.options.get("mcp_server") in plugin.policies


def key(server: str) -> str:
    """The circuit store key of a remote server."""
    return f"mcp:{server}"


class ServerCircuits:
    """Fails a remote tool fast with :class:`~harness_one.CircuitOpen` while its server's circuit is open.

    Counts what the per-tool circuit breaker counts (the remote call raised, timed out, lost
    its connection, answered ``isError``), for all tools of the server together.
    """

    name = PLUGIN_NAME
    order = 40

    def __init__(self) -> None:
        #: server name -> its circuit policy
        self.policies: dict[str, CircuitBreakerPolicy] = {}
        self._lock = threading.Lock()

    def add(self, server: str, policy: CircuitBreakerPolicy) -> None:
        with self._lock:
            self.policies[server] = policy

    def state(self, registry: ToolRegistry, server: str) -> str:
        """``closed``, ``open`` or ``half_open`` (``closed`` for a server without a circuit)."""
        policy = self.policies.get(server)
        if policy is None:
            return "closed"
        return str(registry.state.circuits().snapshot(key(server), policy, now=registry.clock.now())["state"])

    @hookimpl
    @applies_to(_guarded)
    def harness_pre_call(self, call: Call) -> None:
        server = call.tool.options["mcp_server"]
        try:
            wait, probe = call.registry.state.circuits().admit(key(server), self.policies[server], now=call.registry.clock.now())
        except StateUnavailable:
            return  # as the per-tool breaker's default: the call goes ahead uncounted
        if wait > 0:
            err = CircuitOpen(retry_after=wait, tool=call.tool.name, call_id=call.call_id)
            err.message = (
                f"Tool '{call.tool.name}' is paused: its MCP server '{server}' is failing repeatedly. "
                f"Retry after {wait:.3g} s or use another tool."
            )
            err.args = (err.message,)
            raise err
        call.state[_PROBE] = probe
        call.state[_COUNTED] = True

    def _record(self, call: Call, failed: bool) -> None:
        if not call.take(_COUNTED, False):
            return
        server = call.tool.options["mcp_server"]
        probe = call.take(_PROBE, False)
        try:
            call.registry.state.circuits().record(
                key(server), self.policies[server], now=call.registry.clock.now(), failed=failed, probe=probe
            )
        except StateUnavailable:
            return

    @hookimpl
    @applies_to(_guarded)
    def harness_post_call(self, call: Call) -> None:
        self._record(call, failed=False)

    @hookimpl
    @applies_to(_guarded)
    def harness_on_error(self, call: Call, error: BaseException) -> None:
        if call.ran:
            self._record(call, failed=isinstance(error, (ToolExecutionError, ToolTimeout, RetryableError)))
        elif call.take(_COUNTED, False) and call.take(_PROBE, False):
            server = call.tool.options["mcp_server"]
            try:  # a probe refused after admission gives its place back
                call.registry.state.circuits().unprobe(key(server), self.policies[server])
            except StateUnavailable:
                return

    @hookimpl
    def harness_stats(self, registry: ToolRegistry) -> dict[str, Any]:
        servers: dict[str, Any] = {}
        for server, policy in list(self.policies.items()):
            try:
                servers[server] = registry.state.circuits().snapshot(key(server), policy, now=registry.clock.now())
            except StateUnavailable:
                continue
        return {"servers": servers}


def circuits_for(registry: ToolRegistry) -> ServerCircuits:
    """The registry's :class:`ServerCircuits` plugin, registered on first use."""
    found = registry.plugins.get(PLUGIN_NAME)
    if isinstance(found, ServerCircuits):
        return found
    plugin = ServerCircuits()
    registry.plugins.register(plugin, name=PLUGIN_NAME)
    return plugin
