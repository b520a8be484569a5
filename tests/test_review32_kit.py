"""The kit's footprint walk counts a mapping it cannot read as one object (it raised, failing every growth check
that reached such a mapping: a test parameter of another file, alive for the whole session)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from harness_one.testing import footprint


class Offline(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("vault offline")

    def __iter__(self) -> Iterator[str]:
        return iter(["user"])

    def __len__(self) -> int:
        return 1


class Holder:
    def __init__(self) -> None:
        self.vault = Offline()
        self.rows = [1, 2]


def test_a_mapping_that_cannot_be_read_counts_as_one_object() -> None:
    plain = Holder()
    plain.vault = {}  # type: ignore[assignment]  # a readable, empty mapping in its place: one object too
    assert footprint(Holder()) == footprint(plain)
