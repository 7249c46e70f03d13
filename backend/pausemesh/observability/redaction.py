"""Credentials kept out of log lines: ``RedactingFilter``, on every handler of the root logger.

``configure_logging`` puts the filter on the root logger's handler, so it sees every record
that reaches the log, PauseMesh's own and those of the libraries under it (a2a-sdk, mcp, httpx,
uvicorn, Litestar): a library at DEBUG may log a request's headers, and its record is the same
to the filter as ours. Two rules, applied to the message, its arguments and the extra fields:

* **By name**: the value of a header or field whose name says it holds a credential
  (``authorization``, ``proxy-authorization``, ``pausemesh-token``, ``cookie``, ``set-cookie``,
  ``x-api-key``, any ``…token``, ``…secret``, ``…password``) is replaced, wherever the pair
  sits: a dict or any mapping (httpx's and Starlette's ``Headers``), a list of ``(name,
  value)`` pairs (ASGI's raw headers, in bytes too), or the text of one of those (a ``repr``, a
  JSON body, ``name: value`` lines, ``name=value`` query parameters).
* **By shape**: a JWT (``eyJ….….…``), an API key (``pmk_<id>_<secret>``: the id stays, the
  secret goes), ``Bearer <credential>`` and ``PauseMesh <resume token>`` (a resume token is
  16 to 512 URL-safe base64 characters, ``core/tokens.py``), wherever they appear.

An argument the filter does not know (an SDK's request context, a pydantic model) is formatted
into the message first and the text is scrubbed: the record leaves the filter with its message
formatted and no arguments. The usual record holds nothing to scrub and pays little for it: text
that cannot hold a credential is told by its words, lowered, before any pattern runs.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ("REDACTED", "RedactingFilter", "scrub")

REDACTED: Final = "[REDACTED]"

# A field or header whose lowered name holds one of these carries a secret (or a payload,
# which a log line never shows either).
_SECRET_KEYS = ("token", "authorization", "payload", "secret", "password", "key", "cookie")

# -- the text rules ------------------------------------------------------------------------

_NAME_CHARS = r"[A-Za-z0-9_-]"
# A name ending in one of these words, as a header, a query parameter or a JSON/Python key.
_NAMED = re.compile(
    rf"(?i)(?<!{_NAME_CHARS})"
    rf"(?P<name>{_NAME_CHARS}*?(?:authorization|token|cookie|secret|password|passwd"
    r"|(?:api|secret|private|access|signing|client)[-_]?key))"
    # ``name: value``, ``name=value``, ``'name': 'value'``, or a pair ``('name', 'value')``.
    r"(?P<sep>['\"]?[ \t]*[:=][ \t]*|['\"],[ \t]*)"
    r"(?P<value>b?'(?:[^'\\\n]|\\.)*'|b?\"(?:[^\"\\\n]|\\.)*\""
    # Unquoted: an optional scheme, then up to a separator; a cookie's ``; `` pairs too.
    r"|(?:(?:bearer|basic|digest|pausemesh|token)[ \t]+)?[^\s'\",;&)}\]]+"
    r"(?:;[ \t]*[^\s'\",;&)}\]]+)*)"
)
# ``Bearer <credential>`` (RFC 6750's token68) and ``PauseMesh <resume token>``. Words are not
# credentials: a bearer credential holds a digit or inner punctuation, or is 16 characters
# long ("bearer token refused" stays), and a resume token is at least 16 characters ("PauseMesh
# tables are missing" stays). An auth-param (``Bearer realm="pausemesh"``) is not one either.
_SCHEME = re.compile(
    r"(?i)\b(?P<scheme>bearer\s+)(?![A-Za-z_]+=\")"
    r"(?=[A-Za-z0-9._~+/-]{16}|[A-Za-z0-9]*(?:[0-9]|[._~+/-][A-Za-z0-9]))[A-Za-z0-9._~+/-]+=*"
    r"|\b(?P<pausemesh>pausemesh\s+)[A-Za-z0-9_-]{16,}"
)
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]*){0,2}")
# ``pmk_<12 hex id>_<secret>`` (``credentials/api_keys.py``): the id names the key in logs.
_API_KEY = re.compile(r"pmk_(?P<id>[0-9a-f]{12}(?![A-Za-z0-9-]))?(?P<rest>[A-Za-z0-9_-]*)")


def _named(match: re.Match[str]) -> str:
    value = match["value"]
    quote = value[-1]
    if quote in "'\"" and len(value) >= 2:
        shown = f"{'b' if value[0] == 'b' else ''}{quote}{REDACTED}{quote}"
    else:
        shown = REDACTED
    return f"{match['name']}{match['sep']}{shown}"


def _scheme(match: re.Match[str]) -> str:
    return f"{match['scheme'] or match['pausemesh']}{REDACTED}"


def _api_key(match: re.Match[str]) -> str:
    key_id, rest = match["id"], match["rest"]
    if key_id is None:
        return f"pmk_{REDACTED}" if rest else match[0]  # "pmk_" alone (prose) stays
    return f"pmk_{key_id}_{REDACTED}" if rest else match[0]  # the id alone stays


def _plain(text: str) -> bool:
    """True when no rule can match ``text``: the usual case, decided without a pattern.

    A case-insensitive search costs about 0.6 µs even on a short id, and a log line carries
    several strings. Each rule needs one of a few words: ``eyJ`` and ``pmk_`` as they are,
    the others in any case; for ASCII text the lowered words are looked for. Any other text
    (where case folding can map other letters onto ASCII ones) goes through the patterns.
    """
    if "eyJ" in text or "pmk_" in text or not text.isascii():
        return False
    lowered = text.lower()
    return (
        "bearer" not in lowered
        and "pausemesh" not in lowered
        and "auth" not in lowered
        and "token" not in lowered
        and "cookie" not in lowered
        and "secret" not in lowered
        and "passw" not in lowered
        and "key" not in lowered
    )


def _scrub_always(text: str) -> str:
    # Names first: ``'authorization': 'Bearer eyJ…'`` loses its whole value, the scheme with it.
    text = _NAMED.sub(_named, text)
    text = _SCHEME.sub(_scheme, text)
    text = _JWT.sub(REDACTED, text)
    return _API_KEY.sub(_api_key, text)


def scrub(text: str) -> str:
    """``text`` with every credential the rules know replaced by ``[REDACTED]``."""
    # ``sub`` runs only on text that may match: the usual line is returned as it is.
    if _plain(text):
        return text
    return _scrub_always(text)


# -- the structures --------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _secret_key(key: object) -> bool:
    # Records carry the same few field names over and over: decide each once.
    name = str(key).lower()
    return any(s in name for s in _SECRET_KEYS)


# The exact types that never hold text: returned as they are, before any isinstance check.
_PLAIN = frozenset({int, float, bool, type(None)})
_SCALAR = frozenset({*_PLAIN, str})


def _shown(value: Any) -> Any:
    """An object the rules cannot look into, as a field: itself when its text holds nothing to
    scrub, else its scrubbed text (a formatter would print its text)."""
    text = str(value)
    scrubbed = scrub(text)
    return value if scrubbed == text else scrubbed


def _redact(value: Any, objects: bool) -> Any:  # noqa: PLR0911 - one return per kind
    """``value`` with secret-named entries and credential-shaped text replaced. ``objects``:
    what to do with an object of another type: scrub its text (a field) or keep it (an
    argument, scrubbed once formatted into the message)."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is str:
        return scrub(value)
    if kind is dict:
        return _redact_fields(value, objects)
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):  # dict subclasses, httpx's and Starlette's Headers
        return _redact_fields(value, objects)
    if isinstance(value, (list, tuple)):
        items = [_redact_item(v, objects) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    return _shown(value) if objects else value


def _redact_item(item: Any, objects: bool) -> Any:
    # A header pair, as ASGI (bytes) and httpx's ``.raw``/``multi_items()`` hold them.
    if (
        type(item) is tuple
        and len(item) == 2
        and isinstance(item[0], (str, bytes))
        and _secret_key(item[0])
    ):
        return (item[0], REDACTED)
    return _redact(item, objects)


def _clean(value: Any) -> bool:
    """True when ``_redact`` would return ``value`` itself (a number, or text with nothing to
    scrub): the usual field, kept without building anything."""
    kind = type(value)
    return kind in _PLAIN or (kind is str and _plain(value))


def _redact_fields(fields: Mapping[Any, Any], objects: bool) -> dict[Any, Any]:
    """``_redact`` of a mapping, its clean values kept as they are (the usual record)."""
    out: dict[Any, Any] = {}
    for key, value in fields.items():
        if _secret_key(key):
            out[key] = REDACTED
        elif _clean(value):
            out[key] = value
        else:
            out[key] = _redact(value, objects)
    return out


# -- the record ------------------------------------------------------------------------------

# The attributes every record has; any other one is an extra field (``extra={...}``). A record
# with no more attributes than a bare one has none, told by a count.
_BARE = logging.makeLogRecord({}).__dict__
_STANDARD = frozenset({*_BARE, "message", "asctime", "taskName"})
_BARE_COUNT = len(_BARE)
_ABSENT = object()
_tracebacks = logging.Formatter()


def _formatted(msg: Any, args: Any) -> str:
    """The record's message formatted from its arguments (as ``getMessage``). Containers among
    the arguments lose their secret-named entries first; other objects are formatted as they
    are (their text is scrubbed with the message's)."""
    text = str(msg)
    formatted: str
    if type(args) is tuple:
        for arg in args:
            if type(arg) not in _SCALAR:
                break
        else:
            formatted = text % args
            return formatted
    try:
        formatted = text % _redact(args, objects=False)
    except (TypeError, ValueError, KeyError):
        # A field the name rule replaced was formatted as a number (``%(key_count)d``): the
        # arguments as given; the text rules still apply to the result.
        formatted = text % args
    return formatted


@functools.lru_cache(maxsize=256)
def _any_secret_key(keys: tuple[Any, ...]) -> bool:
    # A logger passes the same field names record after record: one look per set of names.
    return any(_secret_key(key) for key in keys)


def _plain_fields(text: str, fields: dict[Any, Any]) -> bool:
    """True when neither ``text`` nor the fields (numbers and text under names that are not
    secret: the usual record) hold anything to scrub. All the text is looked at at once: one
    look costs less than one per field."""
    if _any_secret_key(tuple(fields)):
        return False
    texts = [text]
    for value in fields.values():
        kind = type(value)
        if kind is str:
            texts.append(value)
        elif kind not in _PLAIN:
            return False
    return _plain("\n".join(texts))


class RedactingFilter(logging.Filter):
    """Scrubs credentials from a record's message, arguments, extra fields and traceback.

    On every handler ``configure_logging`` installs, so it covers every logger's records.
    PauseMesh never logs a token on purpose; this is the fence for what a library (or a
    host's own log call with a request) puts in a record. The record leaves with its message
    formatted (``args`` None).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        text = _text_of(record)
        attributes = record.__dict__
        fields = attributes.get("pausemesh", _ABSENT)
        extra = len(attributes) - _BARE_COUNT
        if fields is _ABSENT:
            if text is not None:
                record.msg = scrub(text)
        else:
            extra -= 1
            if text is not None and type(fields) is dict and _plain_fields(text, fields):
                record.msg = text  # the usual record: nothing to scrub anywhere
            else:
                if text is not None:
                    record.msg = scrub(text)
                attributes["pausemesh"] = _redact(fields, objects=True)
        if extra > 0:
            for name in attributes.keys() - _STANDARD - {"pausemesh"}:
                attributes[name] = _redact(attributes[name], objects=True)
        if record.exc_info and not record.exc_text:
            # Formatted here (the text formatter shows ``exc_text`` once set): an exception's
            # text can carry a request's headers.
            record.exc_text = scrub(_tracebacks.formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return True


def _text_of(record: logging.LogRecord) -> str | None:
    """The record's message, formatted (``args`` set to None), not scrubbed yet; None when it
    does not format: then it is scrubbed here and logging reports the error, leaking nothing."""
    msg, args = record.msg, record.args
    if args:
        try:
            text = _formatted(msg, args)
        except (TypeError, ValueError, KeyError):
            record.msg = scrub(str(msg))
            record.args = _redact(args, objects=True)
            return None
        record.args = None
        return text
    if type(msg) is str:
        return msg
    return str(_redact(msg, objects=True))  # a dict or an exception logged as the message
