"""A raw JSON-RPC stdio MCP server that misbehaves as its configuration says, for the MCP client's tests.

Run as ``python mcp_client_hostile_servers.py`` with ``RAW_SERVER`` (JSON) in its environment:

- ``tools``: the listing (default: ``echo`` and ``add``, both ``{"type": "object"}``);
- ``then_tools``: the listing after the first ``tools/call`` of ``add``, announced with ``notifications/tools/list_changed``;
- ``list_error_after``: answer ``tools/list`` with an error after that many listings;
- ``on_start``: ``exit`` (start a child, write its pid to ``pid_file``, exit with ``status``), ``hang`` (write the
  server's pid to ``pid_file``, never answer, never exit at the end of stdin);
- ``on_call``: ``crash_once`` (the first call starts a child holding the server's pipes, writes its pid to
  ``pid_file`` and exits with ``status``; later servers answer), ``hang`` (never answer), ``progress`` (send
  ``progress`` progress notifications, then answer);
- ``results``: by tool name, the result to answer its calls with (default: its name and arguments as text).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

CONFIG: dict[str, Any] = json.loads(os.environ.get("RAW_SERVER", "{}"))
DEFAULT_TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}},
    {"name": "add", "inputSchema": {"type": "object"}},
]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def child() -> int:
    """A process of the server's group that holds its stdout open (a child inherits it)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]).pid


def write_pid(pid: int) -> None:
    with open(CONFIG["pid_file"], "w") as file:
        file.write(str(pid))


def main() -> None:
    tools = CONFIG.get("tools", DEFAULT_TOOLS)
    listings = 0
    start = CONFIG.get("on_start")
    if start == "exit":
        write_pid(child())
        sys.exit(CONFIG.get("status", 1))
    if start == "hang":
        write_pid(os.getpid())
        while True:
            time.sleep(60)
    for line in sys.stdin:
        message = json.loads(line)
        request_id, method = message.get("id"), message.get("method")
        if method == "initialize":
            capabilities = {"tools": {"listChanged": True}}
            version = message["params"]["protocolVersion"]
            info = {"name": "raw", "version": "1"}
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {"protocolVersion": version, "capabilities": capabilities, "serverInfo": info},
                }
            )
        elif method == "tools/list":
            listings += 1
            if listings > CONFIG.get("list_error_after", 1 << 30):
                send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": "listing unavailable"}})
            else:
                send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
        elif method == "tools/call":
            name = message["params"]["name"]
            call = CONFIG.get("on_call")
            if call == "crash_once" and not os.path.exists(CONFIG["pid_file"]):
                write_pid(child())
                os._exit(CONFIG.get("status", 1))
            if call == "hang":
                continue
            if call == "progress":
                token = message["params"]["_meta"]["progressToken"]
                for step in range(CONFIG["progress"]):
                    params = {"progressToken": token, "progress": step, "total": CONFIG["progress"]}
                    send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
            if name == "add" and "then_tools" in CONFIG:
                tools = CONFIG["then_tools"]
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            arguments = message["params"].get("arguments") or {}
            result = CONFIG.get("results", {}).get(name) or {
                "content": [{"type": "text", "text": f"{name} {json.dumps(arguments)}"}]
            }
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif request_id is not None:
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})


if __name__ == "__main__":
    main()
