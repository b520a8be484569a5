"""The ``harness-one`` command line: one module per command group, plus the agent loop.

``_main`` holds the group, its options and the registry it builds; ``catalog`` lists,
describes and exports; ``calls`` calls one tool; ``doctor`` reports on the installation;
``loop`` is the agent loop (``run``); ``serve`` comes from :mod:`harness_one.mcp`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import calls, catalog, doctor
from ._main import EXIT_CODES, LazyGroup, configure_logging, exit_code, main

if TYPE_CHECKING:
    from .._requests import parse_line as parse_request

__all__ = ["EXIT_CODES", "configure_logging", "exit_code", "main", "parse_request"]

#: Commands imported when run: ``harness-one --help`` lists them from their first help line
#: (tests/test_startup_scale.py checks these lines against the commands).
LAZY_COMMANDS = {
    "run": (
        "harness_one._cli.loop",
        "run",
        "The agent loop: JSON Lines requests on stdin, one answer line per request on stdout.",
    ),
    "serve": (
        "harness_one.mcp._command",
        "serve",
        "Serve every tool over the Model Context Protocol, each call through the harness policies.",
    ),
}
assert isinstance(main, LazyGroup)
main.lazy.update(LAZY_COMMANDS)
del calls, catalog, doctor


def __getattr__(name: str) -> Any:
    if name == "parse_request":  # the request parser, imported on first use
        from .._requests import parse_line

        return parse_line
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
