"""Close-name suggestions for unknown tool names, fast at any catalogue size."""

from __future__ import annotations

import difflib
import heapq
from collections import Counter

__all__ = ["NameIndex"]

_SMALL = 2000  # below this many names, difflib over all of them is fast enough
_CANDIDATES = 64


def _grams(name: str) -> set[str]:
    padded = f"\x02{name.lower()}\x03"
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


class NameIndex:
    """Names with a trigram index, so suggestions look at a few candidates, not every name.

    With fewer than 2,000 names, :func:`difflib.get_close_matches` runs over all of them; above,
    the names sharing the most trigrams with the query (trigrams found in over a tenth of
    the names carry little and are skipped) are the candidates difflib ranks.
    """

    def __init__(self) -> None:
        self._names: dict[str, None] = {}
        self._postings: dict[str, list[str]] | None = None

    def add(self, name: str) -> None:
        self._names[name] = None
        if self._postings is not None:
            for gram in _grams(name):
                self._postings.setdefault(gram, []).append(name)

    def remove(self, name: str) -> None:
        self._names.pop(name, None)
        self._postings = None  # rebuilt on the next large query; removals are rare

    def suggest(self, query: str, n: int = 3, cutoff: float = 0.6) -> list[str]:
        if len(self._names) < _SMALL:
            return difflib.get_close_matches(query, list(self._names), n=n, cutoff=cutoff)
        postings = self._index()
        common = len(self._names) // 10
        hits: Counter[str] = Counter()
        for gram in _grams(query):
            found = postings.get(gram)
            if found is not None and len(found) <= common:
                hits.update(found)
        candidates = [name for name, _ in heapq.nlargest(_CANDIDATES, hits.items(), key=lambda item: item[1])]
        return difflib.get_close_matches(query, [c for c in candidates if c in self._names], n=n, cutoff=cutoff)

    def first(self, n: int) -> list[str]:
        """The first ``n`` names in insertion order (for "available tools" listings)."""
        out: list[str] = []
        for name in self._names:
            if len(out) >= n:
                break
            out.append(name)
        return out

    def __len__(self) -> int:
        return len(self._names)

    def _index(self) -> dict[str, list[str]]:
        if self._postings is None:
            postings: dict[str, list[str]] = {}
            for name in self._names:
                for gram in _grams(name):
                    postings.setdefault(gram, []).append(name)
            self._postings = postings
        return self._postings
