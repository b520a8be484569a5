"""``call``: one tool call from the shell, its answer as JSON and its outcome as the exit code."""

from __future__ import annotations

import contextlib
import json
import shlex
from typing import Any

import click

from ._main import (
    answers_out,
    dumps,
    exit_code,
    lost,
    main,
    printable,
    sigterm_as_interrupt,
    state_of,
    utf8_text,
    write_line,
)

__all__ = ["call", "outcome_details"]


def outcome_details(result: Any) -> dict[str, Any]:
    """What a successful answer of ``call`` and ``run`` says beyond its result: ``attempts`` when a
    retry ran the tool more than once, ``"ran": false`` when an earlier outcome answered (an
    idempotent replay, a cache hit)."""
    details: dict[str, Any] = {}
    if result.ok:
        if result.attempts > 1:
            details["attempts"] = result.attempts
        if not result.ran:
            details["ran"] = False
    return details


def _json_object(text: str, option: str) -> dict[str, object]:
    """``--args`` or ``--context``: a JSON object, read as ``run`` reads a request line; ``--args`` that the registry
    reads as arguments although they are no JSON (empty, or only whitespace: ``{}``) are read as it reads them."""
    from .._arguments import ArgumentLimits, LongNumber, decode_arguments, load_json
    from .._config import BOM_ADVICE
    from .._errors import ToolArgumentError
    from .._requests import _kind, long_number_text

    try:
        value = load_json(text)
    except LongNumber as exc:
        raise click.BadParameter(long_number_text(exc), param_hint=option) from None
    except RecursionError:
        raise click.BadParameter("nested too deeply to read", param_hint=option) from None
    except ValueError as exc:
        if option == "--args":  # the registry's own reading decides (registry.call("x", "") is a call with {})
            with contextlib.suppress(ToolArgumentError):
                return decode_arguments(text, ArgumentLimits())
        shown = str(exc).split(";")[0]
        if text.startswith("\ufeff"):  # `--args "$(cat file.json)"` of a file saved as "UTF-8 with BOM"
            shown = BOM_ADVICE
        raise click.BadParameter(f"not valid JSON: {shown}", param_hint=option) from None
    if not isinstance(value, dict):
        raise click.BadParameter(f"must be a JSON object, not {_kind(value)}", param_hint=option)
    return value


def _extra(ctx: click.Context, name: str, extra: list[str]) -> click.UsageError:
    """The usage error for words after NAME: the arguments go in ``--args``; shown masked (:func:`_masked`), as
    the approval hint shows a call: they may be the call's arguments, secrets and all."""
    extra = [_masked(ctx, word) for word in extra]
    shown = " ".join(shlex.quote(word) for word in extra)
    example = shlex.quote(extra[0]) if len(extra) == 1 and extra[0].lstrip().startswith("{") else "'{...}'"
    return click.UsageError(
        f"unexpected extra argument{'s' if len(extra) > 1 else ''} ({shown}): pass the tool's arguments with --args, "
        f"e.g. {ctx.command_path} {shlex.quote(name)} --args {example}",
        ctx,
    )


#: The global options (the group's parameter, the option) that decide which tools, plugins, settings and
#: state store a command works with: the ``run`` that approves a held call needs them all, as given.
_SELECTING = (
    ("config_path", "--config"),
    ("tool_specs", "--tools"),
    ("plugin_options", "-O"),
    ("mcp_specs", "--mcp"),
    ("mcp_call_timeout", "--mcp-call-timeout"),
    ("mcp_max_reply_bytes", "--mcp-max-reply-bytes"),
    ("state_url", "--state"),
)


def _masked(ctx: click.Context, text: str) -> str:
    """``text`` as ``call`` shows it a person on stderr: masked by ``_SHOWN`` (see :func:`_to_approve`), and by
    the ``secret_values`` and ``extra_secret_keys`` the configuration gives the ``logging`` and ``otel`` plugins,
    as their logs mask them (a plugin's that are no strings are left out: the plugin refuses them)."""
    from .._redact import _SHOWN, Redactor

    options = state_of(ctx).settings.plugin_options
    for plugin in ("logging", "otel"):
        given = options.get(plugin, {})
        if given.get("secret_values") or given.get("extra_secret_keys"):
            with contextlib.suppress(TypeError):
                keys, values = given.get("extra_secret_keys", ()), given.get("secret_values", ())
                text = Redactor((), extra_keys=keys, values=values, query_keys=()).mask(text)
    return _SHOWN.mask(text)


def _run_command(ctx: click.Context) -> tuple[str, bool]:
    """``harness-one OPTIONS run``, with the global options given that select the tools, plugins,
    configuration and state (shell-quoted, secrets masked as in the call line), and whether a secret was masked."""
    given = ctx.find_root().params
    words = ["harness-one"]
    masked = False
    for param, option in _SELECTING:
        value = given.get(param)
        for text in value if isinstance(value, tuple) else () if value is None else (value,):
            shown = _masked(ctx, _shown_option(str(text)) if option == "-O" else str(text))
            masked = masked or shown != text
            words += [option, shlex.quote(shown)]
    return " ".join([*words, "run"]), masked


def _shown_option(text: str) -> str:
    """A ``-O NAME.OPTION=VALUE`` as the approval hint shows it: read as the group read it, its value masked as
    ``doctor`` masks a plugin's options (the value of a secret-sounding option, ``logging.secret_values``, whole);
    the text masked as any other option's when it does not read."""
    from .._config import ConfigError, parse_option
    from .._redact import _SHOWN
    from .doctor import _shown_options

    try:
        plugin, option, value = parse_option(text)
    except ConfigError:
        return _SHOWN.mask(text)
    shown = _shown_options({option: value})[option]
    if shown == value:  # nothing in it to mask: as given
        return _SHOWN.mask(text)
    return f"{plugin}.{option}={shown if isinstance(shown, str) else dumps(shown)}"


def _to_approve(
    ctx: click.Context, name: str, args: dict[str, object], context: dict[str, object] | None, idempotency_key: str | None
) -> str:
    """How a person approves the call ``call`` could not: the same call in ``run``, then a decision line.

    ``run`` is given the global options this command was given that select the tools, plugins,
    configuration and state store (:data:`_SELECTING`), so it makes the call with the same catalogue.
    Stderr may be kept (CI logs): secrets in the options and in the call line (its arguments and
    context) are masked by the keys of errors the model reads (:data:`~harness_one.MODEL_SECRET_KEYS`, on a key's
    last words: ``max_tokens`` is shown) and ``pin``, ``auth``, ``signature``, ``credential`` too (``_SHOWN``),
    and the logging plugins' configured ones (:func:`_masked`), whole, and the reader told to put them back.
    """
    request: dict[str, object] = {"id": 1, "name": name, "arguments": args}
    if context is not None:
        request["context"] = context
    if idempotency_key is not None:
        request["idempotency_key"] = idempotency_key
    command, in_options = _run_command(ctx)
    line = json.dumps(request)
    shown = _masked(ctx, line)
    where = [place for place, masked in (("in its options", in_options), ("in the call", shown != line)) if masked]
    secrets = f" (put back the secrets masked {' and '.join(where)})" if where else ""
    return (
        f"harness-one call: a call that needs approval cannot be approved here. To approve it, give `{command}`{secrets} "
        "the call and then the decision, one line each:\n"
        f"  {shown}\n"
        '  {"approve": 1}\n'
        'or, in Python, the approval plugin\'s approve(call_id) and resume(call_id) (docs: "Approval-required tools").'
    )


# allow_extra_args: words after NAME reach the command, which says how to pass arguments
# instead of click's bare "Got unexpected extra argument".
@main.command(context_settings={"allow_extra_args": True})
@click.argument("name", callback=utf8_text)
@click.option("--args", "arguments", default="{}", metavar="JSON", callback=utf8_text, help="The arguments, a JSON object.")
@click.option(
    "--context",
    "context_json",
    default=None,
    metavar="JSON",
    callback=utf8_text,
    help="Caller context (e.g. a user id for keyed rate limits).",
)
@click.option("--idempotency-key", default=None, callback=utf8_text, help="Replay the first outcome of this key.")
@click.option(
    "--strict",
    is_flag=True,
    help="Read --args as OpenAI strict mode sends them (export --strict): a null for an optional parameter means absent.",
)
@click.pass_context
def call(
    ctx: click.Context, name: str, arguments: str, context_json: str | None, idempotency_key: str | None, strict: bool
) -> None:
    """Call tool NAME once and print its answer as JSON; the exit code tells the outcome.

    A malformed --args or --context, or an argument that is not UTF-8, is a usage error (exit 2):
    what the tool refuses is the tool's answer (exit 4). On an error, the text the model would read also goes to stderr, as
    does what the tool prints. Exit 70 when the answer cannot be written (stdout closed).
    A call that needs a person's approval is not run (exit 8): nothing here can approve it, so
    stderr says how to, with ``run``. SIGTERM ends it as Ctrl-C does (the call cancelled), with exit 143.
    """
    if ctx.args:
        raise _extra(ctx, name, ctx.args)
    args = _json_object(arguments, "--args")
    context = None if context_json is None else _json_object(context_json, "--context")
    if idempotency_key is not None:
        _check_idempotency_key(name, idempotency_key)
    out = answers_out(ctx, "call")  # before the tools load: what they print goes to stderr
    ctx.with_resource(sigterm_as_interrupt())  # the call cancelled, so its plugins release what it held (a key)
    registry = state_of(ctx).registry()
    if strict:
        from .._requests import Request, resolve

        args = resolve(Request(None, name, args, "plain"), registry, strict=True).arguments
    outcome = registry.try_call(name, args, context=context, idempotency_key=idempotency_key)
    from .._approval import not_asked

    result = not_asked(outcome, "one_shot")  # no decision can reach this process: withdrawn, and said so
    try:  # the answer first: the tool has run, and nothing written to stderr may keep its outcome from stdout
        write_line(out, dumps({**result.to_dict(), **outcome_details(result)}, indent=2))
        broken = None
    except Exception as exc:  # a closed or broken stdout
        broken = f"{type(exc).__name__}: {exc}"
    if not result.ok:  # the error quotes what the model sent: no escape sequence reaches the terminal
        click.echo(printable(result.for_model()), err=True)
    if result is not outcome:  # it was held for approval
        click.echo(printable(_to_approve(ctx, name, args, context, idempotency_key)), err=True)
    if broken is not None:
        lost(ctx, "call", broken)
    if not result.ok:
        ctx.exit(exit_code(result.error))


def _check_idempotency_key(name: str, key: str) -> None:
    """``--idempotency-key`` refused as the registry refuses a key (its own check), before any tool loads: a usage error."""
    from .._errors import ToolArgumentError
    from .._registry import _check_key

    try:
        _check_key(name, key)
    except ToolArgumentError as exc:
        raise click.BadParameter("; ".join(problem.message for problem in exc.problems), param_hint="--idempotency-key") from None
