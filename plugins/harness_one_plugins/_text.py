"""Private helpers of the output-limit, logging and OpenTelemetry plugins: the text the model reads for a result, and
the secrets a failed call's arguments and context hold, to mask where its error text quotes them."""

from __future__ import annotations

from typing import Any

from harness_one import CallResult, Redactor

__all__ = ["arguments_shown", "holding", "rendered"]


def rendered(value: Any) -> str:
    """``value`` as the model reads it: a string as is, anything else as harness-one's JSON.

    Goes through :meth:`harness_one.CallResult.for_model`, the one renderer of the project.
    """
    return CallResult(True, value, None, "", "", 0.0, 1).for_model()


def arguments_shown(redactor: Redactor, arguments: Any) -> Any:
    """A call's ``arguments`` as logs and spans show them, ``redactor(arguments)`` (``redactor``: :func:`holding`'s for
    the call, so a secret they hold under a secret key is masked under any other key too); text (arguments refused as
    no valid JSON: a decoded call's are a dict) masked first as the excerpt its refusal shows the model is (the core's
    :meth:`harness_one.Redactor.mask_json`), which reads a secret name the text rules do
    not (``{"passwd" "..."}``, a colon left out; ``"pass\\u0077ord"``, escaped)."""
    if isinstance(arguments, str):
        arguments = redactor.mask_json(arguments)
    return redactor(arguments)


def holding(redactor: Redactor, arguments: Any, context: Any = None) -> Redactor:
    """``redactor`` with the texts a call's ``arguments`` and ``context`` hold where it masks them (under secret keys,
    in pairs naming one, after a flag naming one: :meth:`harness_one.Redactor.held`) masked too, wherever they appear
    (:meth:`harness_one.Redactor.with_values`), else ``redactor`` itself: for what shows the call, its arguments, its
    error text and its result, which may quote them under an innocent key or in a message (``access denied for
    admin/Tr0ub4dor&3``) where a structure shows them masked. Each text is masked before it is cut (a secret cut in
    half would show all but its end). (The error the model reads has the values held under the model's keys masked
    where they stand whole: ``harness_one._redact.mask_held``.)"""
    found = redactor.held(arguments, context)
    return redactor.with_values(found) if found else redactor
