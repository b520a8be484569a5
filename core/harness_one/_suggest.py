"""Close-name suggestions for unknown tool names, fast at any catalogue size."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable

__all__ = ["NameIndex", "closest"]

_SMALL = 2000  # below this many names, difflib over all of them is fast enough
_CANDIDATES = 64  # how many names difflib ranks above that
_BUDGET = 20_000  # postings read per query at most, rarest trigrams first


def _grams(name: str) -> set[str]:
    padded = f"\x02{name.lower()}\x03"
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


class NameIndex:
    """Names with a trigram index, so suggestions look at a few candidates, not every name.

    With fewer than 2,000 names, :func:`difflib.get_close_matches` runs over all of them.
    Letter case is ignored (``ECHO`` finds ``echo``). Above, the index is kept current on every add and remove (a few dictionary operations
    per name), and the candidates difflib ranks are the 64 names sharing the most trigrams
    with the query, counted over the query's rarest trigrams (at most 20,000 postings read,
    trigrams found in over a tenth of the names skipped). ``compared`` is how many names
    the last query handed to difflib.
    """

    def __init__(self) -> None:
        self._names: dict[str, None] = {}
        self._postings: dict[str, dict[str, None]] | None = None
        self.compared = 0

    def add(self, name: str) -> None:
        if name in self._names:
            return
        self._names[name] = None
        if self._postings is not None:
            postings = self._postings
            for gram in _grams(name):
                found = postings.get(gram)
                if found is None:
                    postings[gram] = {name: None}
                else:
                    found[name] = None
        elif len(self._names) >= _SMALL:
            self._postings = self._build()

    def remove(self, name: str) -> None:
        if name not in self._names:
            return
        del self._names[name]
        if self._postings is not None:
            for gram in _grams(name):
                found = self._postings.get(gram)
                if found is not None:
                    found.pop(name, None)

    def suggest(self, query: str, n: int = 3, cutoff: float = 0.6) -> list[str]:
        """Up to ``n`` known names close to ``query``, best first."""
        from difflib import get_close_matches  # imported for the first unknown name only

        if self._postings is None or len(self._names) < _SMALL:
            names = list(self._names)
            self.compared = len(names)
            return _close(get_close_matches, query, names, n, cutoff)
        common = len(self._names) // 10
        lists = sorted((found for gram in _grams(query) if (found := self._postings.get(gram)) and len(found) <= common), key=len)
        hits: dict[str, int] = {}
        budget = _BUDGET
        for found in lists:
            if len(found) > budget:
                break
            budget -= len(found)
            for name in tuple(found):  # copied at once: another thread may add or remove names meanwhile
                hits[name] = hits.get(name, 0) + 1
        candidates = heapq.nlargest(_CANDIDATES, hits, key=hits.__getitem__)
        self.compared = len(candidates)
        return _close(get_close_matches, query, candidates, n, cutoff)

    def first(self, n: int) -> list[str]:
        """The first ``n`` names in insertion order (for "available tools" listings)."""
        while True:  # another thread may add or remove a name between making the iterator and reading it
            try:
                return list(itertools.islice(self._names, n))
            except RuntimeError:
                continue

    def __len__(self) -> int:
        return len(self._names)

    def _build(self) -> dict[str, dict[str, None]]:
        postings: dict[str, dict[str, None]] = {}
        for name in self._names:
            for gram in _grams(name):
                postings.setdefault(gram, {})[name] = None
        return postings


def _close(match: Callable[..., list[str]], query: str, names: list[str], n: int, cutoff: float) -> list[str]:
    """``difflib.get_close_matches`` (``match``) with letter case ignored, as the trigrams ignore it:
    ``ECHO`` finds ``echo``. Names that differ only in case are all given, in catalogue order."""
    folded: dict[str, list[str]] = {}
    for name in names:
        folded.setdefault(name.lower(), []).append(name)
    found = [name for close in match(query.lower(), folded, n=n, cutoff=cutoff) for name in folded[close]]
    return found[:n]


def closest(name: str, known: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The one name among ``known`` closest to ``name`` (as :meth:`NameIndex.suggest` ranks, at least ``cutoff``
    alike), or None."""
    index = NameIndex()
    for each in sorted(known):
        index.add(each)
    found = index.suggest(name, n=1, cutoff=cutoff)
    return found[0] if found else None
