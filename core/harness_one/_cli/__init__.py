"""The ``harness-one`` command line: one module per command group, plus the agent loop.

``_main`` holds the group, its options and the registry it builds; ``catalog`` lists,
describes and exports; ``calls`` calls one tool; ``doctor`` reports on the installation;
``loop`` is the agent loop (``run``); ``serve`` comes from :mod:`harness_one.mcp`.
"""

from __future__ import annotations

from .. import _requests
from . import calls, catalog, doctor, loop
from ._main import EXIT_CODES, configure_logging, exit_code, main

__all__ = ["EXIT_CODES", "configure_logging", "exit_code", "main", "parse_request"]

parse_request = _requests.parse_line


def _add_serve() -> None:
    from ..mcp._command import serve

    main.add_command(serve)


_add_serve()
del calls, catalog, doctor, loop
