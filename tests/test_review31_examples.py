"""Review 31, examples: ``examples/redis_workers.py`` masks a Redis password in what it prints, answers a URL that
is no Redis one with a one-line message (it raised twice, the second time in its own ``finally``), and refuses
``--seconds inf`` (which ran for ever)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "redis_workers.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=120, check=False)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once it is closed


def test_the_password_of_an_unavailable_redis_is_not_printed() -> None:
    done = _run(f"redis://user:s3cretpw@127.0.0.1:{_closed_port()}/0", "--seconds", "1")
    assert done.returncode == 1 and done.stdout == ""
    assert "s3cretpw" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("Redis at redis://[REDACTED]@127.0.0.1:"), done.stderr


@pytest.mark.parametrize("url", ["notaurl", "memory:"])
def test_a_url_that_is_no_redis_one_is_a_one_line_message(url: str) -> None:
    done = _run(url, "--seconds", "1")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [f"State({url!r}) is not a Redis state"], done.stderr


@pytest.mark.parametrize("seconds", ["inf", "nan", "0", "-1"])
def test_seconds_must_be_a_positive_finite_number(seconds: str) -> None:
    done = _run(f"redis://127.0.0.1:{_closed_port()}/0", "--seconds", seconds)
    assert done.returncode == 2
    assert "--seconds must be a positive finite number" in done.stderr
