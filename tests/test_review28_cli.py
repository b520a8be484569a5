"""Review 28 (CLI): Ctrl-C ends a command with exit 130; the standard library's log records take the
CLI's log format, level and masking."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness_one._cli import main


def _cli(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_ONE_")}
    env.update(HARNESS_ONE_STATE="memory:", HARNESS_ONE_CACHE_DIR="", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.Popen(
        [sys.executable, "-m", "harness_one", *args],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _interrupted_when_ready(process: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGINT once the process said ``ready`` on stderr (its tool or tools file is waiting); its stdout and stderr."""
    assert process.stderr is not None
    seen = []
    for line in process.stderr:  # up to the marker: the wait is then under way
        seen.append(line)
        if line.strip() == "ready":
            break
    else:
        raise AssertionError(f"never ready: {''.join(seen)}")
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)  # the tool or import waits 120 s: only the fix ends it sooner
    return out, "".join(seen) + err


WAITING_TOOL = """
import sys, time
from harness_one import define_tool

@define_tool
def wait(seconds: float) -> str:
    '''Wait.'''
    print("ready", file=sys.stderr, flush=True)
    time.sleep(seconds)
    return "done"
"""


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_ctrl_c_while_call_runs_its_tool_exits_130_with_one_line(tmp_path: Path, mode: str) -> None:
    code = WAITING_TOOL
    if mode == "async":
        code = code.replace("def wait", "async def wait").replace("time.sleep(seconds)", "await asyncio.sleep(seconds)")
        code = code.replace("import sys, time", "import asyncio, sys, time")
    (tmp_path / "waiting.py").write_text(code)
    process = _cli(tmp_path, "--tools", "waiting.py", "call", "wait", "--args", '{"seconds": 120}')
    out, err = _interrupted_when_ready(process)
    assert process.returncode == 130, err
    assert out == ""
    assert err.splitlines()[-1] == "harness-one call: interrupted"
    assert "Aborted!" not in err


def test_ctrl_c_while_a_tools_file_imports_exits_130(tmp_path: Path) -> None:
    (tmp_path / "slow_import.py").write_text("import sys, time\nprint('ready', file=sys.stderr, flush=True)\ntime.sleep(120)\n")
    (tmp_path / "fine.py").write_text(
        "from harness_one import define_tool\n\n@define_tool\ndef echo(text: str) -> str:\n    '''Echo.'''\n    return text\n"
    )
    process = _cli(tmp_path, "--tools", "slow_import.py", "--tools", "fine.py", "call", "echo", "--args", '{"text": "a"}')
    out, err = _interrupted_when_ready(process)
    assert process.returncode == 130, err
    assert out == ""
    assert err.splitlines()[-1] == "harness-one call: interrupted"
    assert "Aborted!" not in err


def test_a_tools_file_raising_keyboard_interrupt_ends_doctor_as_ctrl_c_does(tmp_path: Path) -> None:
    (tmp_path / "kbi.py").write_text("raise KeyboardInterrupt\n")
    process = _cli(tmp_path, "--tools", "kbi.py", "doctor")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert out == ""
    assert err.strip() == "harness-one doctor: interrupted"


# --- the standard library's log records -------------------------------------------------------------------------


def _records_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@contextlib.contextmanager
def _bare_root() -> Iterator[logging.Logger]:
    """The root logger with no handler meanwhile, as in a process that did not set up logging (pytest's own
    handlers, which it adds as each test runs, are put back, and the root's level: one left at DEBUG made every
    later test's records, the logging plugin's per call too, pile up in pytest's capture)."""
    root = logging.getLogger()
    handlers, level = root.handlers, root.level
    root.handlers = []
    try:
        yield root
    finally:
        root.handlers = handlers
        root.setLevel(level)


def test_stdlib_records_are_json_masked_and_filtered_by_the_level(runner: CliRunner, tmp_path: Path) -> None:
    with _bare_root():
        (tmp_path / "noisy_tools.py").write_text(
            "import logging\n"
            "from harness_one import define_tool\n"
            "log = logging.getLogger('some.sdk')\n"
            "log.info('an info line, not shown at warning')\n"
            "log.warning('starting server, token=sk-BANNERSECRET123')\n"
            "try:\n"
            "    raise ValueError(\"input_value='api_key=sk-INEXCEPTION456'\")\n"
            "except ValueError:\n"
            "    log.exception('failed to parse')\n"
            "@define_tool\n"
            "def echo(text: str) -> str:\n"
            "    '''Echo.'''\n"
            "    return text\n"
        )
        root = logging.getLogger()
        level, handlers = root.level, list(root.handlers)
        result = runner.invoke(main, ["--log-format", "json", "--tools", "noisy_tools.py", "list"], standalone_mode=False)
        assert result.exit_code == 0, result.output
        records = _records_of(result.stderr)  # every line JSON: none is the bare default's plain text
        assert [(r["logger"], r["level"], r["event"]) for r in records] == [
            ("some.sdk", "warning", "starting server, token=[REDACTED]"),
            ("some.sdk", "error", "failed to parse"),
        ]
        assert "sk-INEXCEPTION456" not in records[1]["exception"]
        assert records[1]["exception"].endswith("ValueError: input_value='api_key=[REDACTED]'")
        assert "sk-" not in result.stderr
        # the command's end (main() embedded) takes its handler off the root logger, and gives the root its level back
        assert (root.level, root.handlers) == (level, handlers)

        quiet = runner.invoke(
            main, ["--log-format", "json", "--log-level", "error", "--tools", "noisy_tools.py", "list"], standalone_mode=False
        )
        assert quiet.exit_code == 0, quiet.output
        assert [(r["logger"], r["level"], r["event"]) for r in _records_of(quiet.stderr)] == [
            ("some.sdk", "error", "failed to parse")
        ]


def test_stdlib_records_on_the_console_are_masked_and_one_handler_serves_them() -> None:
    with _bare_root():
        from harness_one._cli import configure_logging

        class Terminal(io.StringIO):
            def isatty(self) -> bool:
                return True

        first, stream = io.StringIO(), Terminal()
        root = logging.getLogger()
        level, handlers = root.level, list(root.handlers)
        undo_first = configure_logging("json", "warning", first)
        undo = configure_logging("console", "debug", stream)  # a second set-up replaces the first's handler
        try:
            assert len(root.handlers) == len(handlers) + 1
            logging.getLogger("mcp.client.stdio").debug("session for https://user:hunter2@example.com/mcp \x1b[31mred")
        finally:
            undo()
            undo_first()  # (its handler is gone already: nothing to do)
        assert (root.level, root.handlers) == (level, handlers)
        assert first.getvalue() == ""
        line = stream.getvalue()
        assert "session for https://[REDACTED]@example.com/mcp \\x1b[31mred" in line
        assert "hunter2" not in line and "\x1b[31mred" not in line
        assert "mcp.client.stdio" in line and "debug" in line


def test_a_record_and_an_event_logged_at_once_never_share_a_line() -> None:
    """The records' handler writes through structlog's writer of the stream and its lock: a record logged while
    an event is half written (its text out, its newline not yet) waits for the newline."""
    with _bare_root():
        import threading

        import structlog

        from harness_one._cli import configure_logging

        class Stream(io.StringIO):
            hook: Any = None

            def write(self, text: str) -> int:
                written = super().write(text)
                hook, self.hook = self.hook, None
                if hook is not None:
                    hook()
                return written

        stream = Stream()
        other = threading.Thread(target=lambda: logging.getLogger("some.sdk").warning("a record"))

        def between() -> None:  # the event's text is written, its newline not yet: a record comes from another thread
            other.start()
            other.join(0.2)  # (it waits for the lock: this wait runs out)

        undo = configure_logging("json", "warning", stream)
        try:
            stream.hook = between
            structlog.get_logger("harness_one").warning("an event")
            other.join()
        finally:
            undo()
        assert [(r.get("logger"), r["event"]) for r in _records_of(stream.getvalue())] == [
            (None, "an event"),
            ("some.sdk", "a record"),
        ]


def test_the_import_bound_and_the_root_logger_are_given_back_when_the_command_ends(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``main()`` embedded in a process (as here): the command's HARNESS_ONE_IMPORT_TIMEOUT bounds no later import
    of the process's registries, and the root logger has its handlers and level back."""
    with _bare_root():
        from harness_one import _entrypoints

        root = logging.getLogger()
        level, handlers = root.level, list(root.handlers)
        monkeypatch.setenv("HARNESS_ONE_IMPORT_TIMEOUT", "7")
        result = runner.invoke(main, ["--log-level", "debug", "list"], standalone_mode=False)
        assert result.exit_code == 0, result.output
        assert _entrypoints._import_timeout is None
        assert (root.level, root.handlers) == (level, handlers)


# --- review 28, round 2: the root handler's life, other handlers, format errors, embedded Ctrl-C --------------------


def test_a_process_that_set_up_logging_keeps_its_handlers_and_level() -> None:
    with _bare_root() as bare_root:
        from harness_one._cli import configure_logging

        app = io.StringIO()
        app_handler = logging.StreamHandler(app)
        app_handler.setFormatter(logging.Formatter("APP %(levelname)s %(name)s: %(message)s"))
        bare_root.addHandler(app_handler)
        bare_root.setLevel(logging.DEBUG)
        ours = io.StringIO()
        undo = configure_logging("json", "warning", ours)
        try:
            assert (bare_root.handlers, bare_root.level) == ([app_handler], logging.DEBUG)
            logging.getLogger("acme").info("info x")
            logging.getLogger("acme").warning("warned x")
        finally:
            undo()
        assert app.getvalue() == "APP INFO acme: info x\nAPP WARNING acme: warned x\n"  # once each, none dropped
        assert ours.getvalue() == ""
        assert (bare_root.handlers, bare_root.level) == ([app_handler], logging.DEBUG)


def test_a_library_with_a_null_handler_has_its_records_written() -> None:
    """As logging.basicConfig has it: a package's own handler (a NullHandler, as urllib3 adds) does not keep its
    records from the root's handler (skipping records any handler of their logger might write lost them all)."""
    with _bare_root():
        from harness_one._cli import configure_logging

        quiet = logging.getLogger("quietlib")
        null = logging.NullHandler()
        quiet.addHandler(null)
        stream = io.StringIO()
        undo = configure_logging("json", "warning", stream)
        try:
            logging.getLogger("quietlib.pool").warning("pool is full")
        finally:
            undo()
            quiet.removeHandler(null)
        assert [(r["logger"], r["event"]) for r in _records_of(stream.getvalue())] == [("quietlib.pool", "pool is full")]


def test_a_record_its_own_loggers_handler_writes_is_written_by_both() -> None:
    with _bare_root():
        from harness_one._cli import configure_logging

        package = io.StringIO()
        acme = logging.getLogger("acme.pkg")
        own = logging.StreamHandler(package)
        acme.addHandler(own)
        stream = io.StringIO()
        undo = configure_logging("json", "warning", stream)
        try:
            logging.getLogger("acme.pkg.sub").warning("from the package")  # its parent's handler writes it
            logging.getLogger("other").warning("from another")
        finally:
            undo()
            acme.removeHandler(own)
        assert package.getvalue() == "from the package\n"
        assert [(r["logger"], r["event"]) for r in _records_of(stream.getvalue())] == [
            ("acme.pkg.sub", "from the package"),
            ("other", "from another"),
        ]


def test_a_record_that_cannot_be_formatted_is_one_line_without_its_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    with _bare_root():
        from harness_one._cli import configure_logging

        monkeypatch.setattr(logging, "raiseExceptions", True)
        stream = io.StringIO()
        undo = configure_logging("json", "warning", stream)
        try:
            logging.getLogger("acme.tools").warning("connecting with token %d", "sk-LEAKBADFMT123456789")
            logging.getLogger("acme.tools").warning("%(user)s %(n)d", {"user": "api_key=sk-LEAK2", "n": "x"})
        finally:
            undo()
        records = _records_of(stream.getvalue())
        for record in records:
            del record["timestamp"]
        assert records == [
            {
                "event": "a log record could not be formatted",
                "logger": "acme.tools",
                "level": "error",
                "error": "TypeError",
                "msg": "connecting with token %d",
                "args": "(str,)",
            },
            {
                "event": "a log record could not be formatted",
                "logger": "acme.tools",
                "level": "error",
                "error": "TypeError",
                "msg": "%(user)s %(n)d",
                "args": "{str: str, str: str}",
            },
        ]
        assert "sk-LEAK" not in stream.getvalue()


def test_a_record_whose_message_cannot_be_made_text_is_still_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """str(record.msg) raised inside handleError: the record was lost without a word."""

    class Lazy:
        def __str__(self) -> str:
            raise RuntimeError("lazy reply not loaded")

    with _bare_root():
        from harness_one._cli import configure_logging

        monkeypatch.setattr(logging, "raiseExceptions", True)
        stream = io.StringIO()
        undo = configure_logging("json", "warning", stream)
        try:
            logging.getLogger("acme.tools").warning(Lazy())
        finally:
            undo()
        (record,) = _records_of(stream.getvalue())
        assert (record["error"], record["msg"], record["args"]) == ("RuntimeError", "<Lazy>", "()")


def test_embedded_main_raises_abort_on_ctrl_c(runner: CliRunner, tmp_path: Path) -> None:
    """``main(standalone_mode=False)``: Ctrl-C is the application's (click's ``Abort``), not a returned 130."""
    import click

    for name in ("embedded", "standalone"):
        (tmp_path / f"{name}.py").write_text(
            f"from harness_one import define_tool\n@define_tool\ndef stop_{name}(text: str) -> str:\n"
            '    """s"""\n    raise KeyboardInterrupt\n'
        )
    args = ["call", "--args", '{"text": "a"}']
    embedded = runner.invoke(main, ["--tools", "embedded.py", *args, "stop_embedded"], standalone_mode=False)
    assert type(embedded.exception) is click.exceptions.Abort
    assert "interrupted" not in embedded.stderr
    standalone = runner.invoke(main, ["--tools", "standalone.py", *args, "stop_standalone"])
    assert standalone.exit_code == 130
    assert standalone.stderr == "harness-one call: interrupted\n"


def test_the_sdks_per_request_lines_show_at_debug_alone() -> None:
    with _bare_root():
        from harness_one._cli import configure_logging

        names = ("mcp.server.streamable_http", "mcp.server.streamable_http_manager")
        stream = io.StringIO()
        undo_info = configure_logging("json", "info", stream)
        logging.getLogger(names[0]).info("Terminating session: None")
        logging.getLogger("mcp.server.lowlevel.server").info("Processing request of type CallToolRequest")
        assert [logging.getLogger(n).level for n in names] == [logging.WARNING, logging.WARNING]
        undo = configure_logging("json", "debug", stream)  # a later set-up at debug shows them again
        try:
            logging.getLogger(names[1]).debug("a debug line")
            assert [logging.getLogger(n).level for n in names] == [logging.NOTSET, logging.NOTSET]
        finally:
            undo()
            undo_info()
        assert [(r["logger"], r["event"]) for r in _records_of(stream.getvalue())] == [
            ("mcp.server.lowlevel.server", "Processing request of type CallToolRequest"),
            (names[1], "a debug line"),
        ]
        undo = configure_logging("json", "info", stream)
        undo()  # gives the loggers their level back
        assert [logging.getLogger(n).level for n in names] == [logging.NOTSET, logging.NOTSET]
