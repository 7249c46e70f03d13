"""Who may decide a pause (four-eyes approvals).

A pause may name ``approvers``: typed entries, ``Approver.principal("alice")``,
``Approver.role("manager")`` (roles come from the resolved ``Identity``) or
``Approver.operation(operation_id)`` (whoever learns an operation's outcome, e.g. a status
watcher; no person). Matching compares the kind and the name, so a principal never matches a
role entry whatever it is called, and resolvers refuse principal ids that look like another
kind (``core/identity.py``).

When a pause names no approvers, its owner decides it, as always. When it names some, only
they may decide it, and never its owner (the requester): four eyes are two people. A pause that
sets ``allow_requester`` lets an owner who is also an approver (by name or role) decide it.

Text form (shown to clients as ``approvers: [...]``, kept as the inbox's index key, and how
rows written before typed approvers were stored): ``role:NAME``, ``operation:ID``, or the
principal id itself. It has one reading because no principal id starts with ``role:`` or
``operation:``. It is for showing and reading back, never for input: ``check_approvers``
refuses strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal, final

from pausemesh.core.errors import InvalidInputError
from pausemesh.core.validation import check_id

__all__ = (
    "MAX_APPROVERS",
    "OPERATION_PREFIX",
    "ROLE_PREFIX",
    "Approver",
    "ApproverKind",
    "caller_entries",
    "check_approvers",
    "decode_approver",
    "encode_approver",
    "is_requester",
    "may_decide",
    "names_any",
    "parse_approver",
)

ApproverKind = Literal["principal", "role", "operation"]

ROLE_PREFIX: Final = "role:"
OPERATION_PREFIX: Final = "operation:"
MAX_APPROVERS: Final = 32
_KINDS: Final[frozenset[str]] = frozenset({"principal", "role", "operation"})
_PREFIXES: Final[dict[ApproverKind, str]] = {"role": ROLE_PREFIX, "operation": OPERATION_PREFIX}


_ENTRIES: Final = "Approver.principal(id), Approver.role(name), Approver.operation(id)"


def _invalid(message: str) -> InvalidInputError:
    return InvalidInputError(message, code="INVALID_APPROVERS", field="approvers")


@final
class Approver:
    """One approver entry: a principal, a role or an operation, by name.

    Build it with ``Approver.principal(id)``, ``Approver.role(name)`` or
    ``Approver.operation(id)``. Immutable and hashable; equal when kind and name are.
    """

    __slots__ = ("_kind", "_name")

    _kind: ApproverKind
    _name: str

    def __init__(self, kind: ApproverKind, name: str) -> None:
        if kind not in _KINDS:
            raise _invalid(f"an approver is a principal, a role or an operation, not {kind!r}")
        check_id(name, "approvers")
        if kind == "principal" and _looks_typed(name):
            msg = (
                f"a principal id cannot start with {ROLE_PREFIX!r} or {OPERATION_PREFIX!r}:"
                " use Approver.role(...) or Approver.operation(...)"
            )
            raise _invalid(msg)
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_name", name)

    @classmethod
    def principal(cls, principal_id: str) -> Approver:
        """The principal with this id (an API key's is ``key:<name>``)."""
        return cls("principal", principal_id)

    @classmethod
    def role(cls, name: str) -> Approver:
        """Anyone whose identity holds this role."""
        return cls("role", name)

    @classmethod
    def operation(cls, operation_id: str) -> Approver:
        """No person: whoever learns this operation's outcome decides the pause (a status
        watcher, an operator), by an ``OperationWatcher`` (``core/resume.py``)."""
        return cls("operation", operation_id)

    @classmethod
    def _unchecked(cls, kind: ApproverKind, name: str) -> Approver:
        # The caller's own entries (an authenticated principal and its roles): they are only
        # compared, never stored, so a name the checks would refuse simply matches nothing.
        entry = object.__new__(cls)
        object.__setattr__(entry, "_kind", kind)
        object.__setattr__(entry, "_name", name)
        return entry

    @property
    def kind(self) -> ApproverKind:
        return self._kind

    @property
    def name(self) -> str:
        return self._name

    @property
    def text(self) -> str:
        """The text form: ``role:NAME``, ``operation:ID`` or the principal id."""
        return _PREFIXES.get(self._kind, "") + self._name

    def __setattr__(self, name: str, value: object) -> None:
        msg = "Approver is immutable"
        raise AttributeError(msg)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Approver):
            return NotImplemented
        return self._kind == other._kind and self._name == other._name

    def __hash__(self) -> int:
        return hash((self._kind, self._name))

    def __repr__(self) -> str:
        return f"Approver.{self._kind}({self._name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Approver, (self._kind, self._name))


def _looks_typed(name: str) -> bool:
    # Case-insensitive: "Role:manager" is no role, but it would read like one to a person.
    folded = name.casefold()
    return folded.startswith((ROLE_PREFIX, OPERATION_PREFIX))


def parse_approver(text: str) -> Approver:
    """An entry from its text form (rows written before typed approvers, and the text shown
    to clients): ``role:X`` is a role, ``operation:X`` an operation, anything else a principal.
    Never for input from a caller: a string is not an approver (``check_approvers``).

    What was stored is read as it was written, never refused: an entry today's checks would
    refuse (a legacy principal id such as ``Role:x``) simply matches nobody."""
    for kind, prefix in _PREFIXES.items():
        if text.startswith(prefix):
            return Approver._unchecked(kind, text[len(prefix) :])  # noqa: SLF001 - stored
    return Approver._unchecked("principal", text)  # noqa: SLF001 - stored


def encode_approver(approver: Approver) -> dict[str, str]:
    """How an entry is stored in a ``continuation.created`` event: ``{"kind", "name"}``."""
    return {"kind": approver.kind, "name": approver.name}


def decode_approver(value: object) -> Approver:
    """A stored entry: ``{"kind", "name"}``, or a bare string written before (its text form)."""
    if isinstance(value, str):
        return parse_approver(value)
    if isinstance(value, dict) and set(value) == {"kind", "name"}:
        kind, name = value["kind"], value["name"]
        if kind in _KINDS and isinstance(name, str) and name:
            return Approver._unchecked(kind, name)  # noqa: SLF001 - stored, see parse_approver
    msg = "a stored approver is {kind, name} or its text form"
    raise ValueError(msg)


def check_approvers(approvers: Iterable[object] | None) -> tuple[Approver, ...]:
    """Approvers as stored: ``Approver`` entries only (strings are refused: "role:manager" as
    a string is exactly the ambiguity typed entries remove), at most ``MAX_APPROVERS``, no
    duplicates, in the order given."""
    if approvers is None:
        return ()
    if isinstance(approvers, (str, bytes, dict)) or not isinstance(approvers, Iterable):
        raise _invalid(f"approvers must be a list of {_ENTRIES}")
    out: list[Approver] = []
    for approver in approvers:
        if not isinstance(approver, Approver):
            raise _invalid(f"each approver is one of {_ENTRIES}, not {type(approver).__name__}")
        if approver not in out:
            out.append(approver)
        if len(out) > MAX_APPROVERS:
            raise _invalid(f"at most {MAX_APPROVERS} approvers")
    return tuple(out)


def caller_entries(principal: str | None, roles: Iterable[str] = ()) -> tuple[Approver, ...]:
    """The entries that name a person: its principal and each of its roles (none without a
    principal: an anonymous caller is nobody's approver)."""
    if principal is None:
        return ()
    return (
        Approver._unchecked("principal", principal),  # noqa: SLF001 - this module's own
        *(Approver._unchecked("role", role) for role in sorted(set(roles))),  # noqa: SLF001
    )


def names_any(approvers: Iterable[Approver], entries: Iterable[Approver]) -> bool:
    """Whether ``approvers`` holds one of ``entries`` (same kind and same name)."""
    wanted = set(entries)
    return any(approver in wanted for approver in approvers)


def is_requester(owner: str | None, principal: str | None) -> bool:
    """Whether ``principal`` asked (owns) the pause; nobody is the requester of an ownerless
    pause (a server without a principal resolver)."""
    return owner is not None and principal == owner


def may_decide(
    approvers: Sequence[Approver],
    *,
    owner: str | None,
    principal: str | None,
    roles: Iterable[str] = (),
    allow_requester: bool = False,
) -> bool:
    """Whether ``principal`` (with ``roles``) may decide a pause owned by ``owner``."""
    if not approvers:
        return principal == owner
    if is_requester(owner, principal) and not allow_requester:
        return False
    return names_any(approvers, caller_entries(principal, roles))
