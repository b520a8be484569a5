"""Private helpers of the output-limit, logging and OpenTelemetry plugins: the text the model reads for a result, and
the secrets a failed call's arguments hold, to mask where its error text quotes them."""

from __future__ import annotations

import itertools
from typing import Any

from harness_one import CallResult, Redactor

__all__ = ["rendered", "secrets_of"]


def rendered(value: Any) -> str:
    """``value`` as the model reads it: a string as is, anything else as harness-one's JSON.

    Goes through :meth:`harness_one.CallResult.for_model`, the one renderer of the project.
    """
    return CallResult(True, value, None, "", "", 0.0, 1).for_model()


_MAX_WALK = 1000  # argument values looked at for secrets per failed call (a model's huge arguments: bounded work)
#: The shortest string under a secret key masked where the error text quotes it: the values come from the model,
#: and masking "a" or "3" would let it blank out any letter or number of a logged error line.
_SHORTEST_SECRET = 4


def secrets_of(redactor: Redactor, arguments: Any) -> Redactor | None:
    """A redactor of the strings ``arguments`` holds under secret keys (as ``redactor`` tells them, at any
    depth of dicts, lists and tuples; the first 1,000 values; of at least :data:`_SHORTEST_SECRET` characters),
    else None: for the error text of a failed call, which may quote them (``access denied for
    admin/Tr0ub4dor&3``) where the arguments show them masked."""
    if not arguments:  # (most failed calls: no walk, no redactor)
        return None
    found: list[str] = []
    stack: list[tuple[Any, bool]] = [(arguments, False)]
    budget = _MAX_WALK
    while stack and budget:
        value, secret = stack.pop()
        budget -= 1
        if isinstance(value, str):
            if secret and str.__len__(value) >= _SHORTEST_SECRET:
                found.append(str.__str__(value))  # (a plain str: a subclass's own methods are not called)
        elif isinstance(value, dict):  # read by the builtin methods: a subclass's own items() or __iter__ is not called
            stack.extend((item, secret or redactor.is_secret(key)) for key, item in itertools.islice(dict.items(value), budget))
        elif isinstance(value, list | tuple):
            items = list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value)
            stack.extend((item, secret) for item in itertools.islice(items, budget))
    return Redactor((), values=found, query_keys=()) if found else None
