"""MCP for harness-one: serve a registry's tools to any MCP client, and import a remote server's tools.

Needs the ``mcp`` extra (``pip install 'harness-one[mcp]'``, the official SDK 2.x). Importing
this package does not import the SDK; the names below load it on first use.

Server: :func:`create_server` (the SDK's low-level ``Server``), :func:`http_app` (an ASGI
app for streamable HTTP), :func:`serve_stdio`, :func:`serve_http`, :func:`serve`.
Client: :func:`import_tools` / :func:`aimport_tools` (a :class:`RemoteServer`'s tools into a
registry), :class:`McpSpec`, :func:`parse_mcp_spec`, :func:`attach_servers`. See ``docs/mcp.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._spec import ERROR_META_KEY, POLICY_KEYS, McpSpec, McpSpecError, attach_servers, parse_mcp_spec

if TYPE_CHECKING:
    from ._client import McpConnectionError, RemoteServer, RemoteToolError, aimport_tools, import_tools, local_name
    from ._server import Principal, create_server, default_principal, http_app, serve, serve_http, serve_stdio

__all__ = [
    "ERROR_META_KEY",
    "POLICY_KEYS",
    "McpConnectionError",
    "McpSpec",
    "McpSpecError",
    "Principal",
    "RemoteServer",
    "RemoteToolError",
    "aimport_tools",
    "attach_servers",
    "create_server",
    "default_principal",
    "http_app",
    "import_tools",
    "local_name",
    "parse_mcp_spec",
    "serve",
    "serve_http",
    "serve_stdio",
]

_LAZY = {
    **dict.fromkeys(
        ("McpConnectionError", "RemoteServer", "RemoteToolError", "aimport_tools", "import_tools", "local_name"), "_client"
    ),
    **dict.fromkeys(
        ("Principal", "create_server", "default_principal", "http_app", "serve", "serve_http", "serve_stdio"), "_server"
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harness_one.mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
