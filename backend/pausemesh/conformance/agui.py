"""The AG-UI interrupt contract and resumability, probed rule by rule against one endpoint.

A scenario (a user message that makes the agent ask, and optionally the answers) starts four
threads, each on a run that ends with an interrupt; each probe is one more request on one of
them. The rules (AG-UI 1.0 ``interrupt-resume``, the interrupts concepts page, and the
resumability PauseMesh adds) and what passes:

- ``interrupt-snapshots``: the interrupting run sends ``MESSAGES_SNAPSHOT`` and
  ``STATE_SNAPSHOT`` before its ``RUN_FINISHED``.
- ``restore-by-connect``: a fresh client posting to the connect route gets the thread's
  messages and its pending interrupts back, and the agent does not run (N/A when the server
  has no such route: AG-UI 1.0 defines none).
- ``reconnect-last-event-id``: the run's frames carry ``id:``; the events route, asked with
  ``Last-Event-ID`` set to a middle frame's id, sends the later frames again, the same (N/A
  when the frames carry no id: AG-UI 1.0's HTTP binding has no resumption).
- ``pending-blocks-new-input``: a new user message with no ``resume`` while a question is open
  is refused (an HTTP error or a ``RUN_ERROR``) or ends with the open interrupts again; it
  never ends as success. Afterwards the question is still answerable.
- ``partial-cohort-refused``: a ``resume`` that leaves an open interrupt out (the first of two
  or more answered; for a cohort of one, an entry for an unknown id only) is refused or
  re-asks the left-out ones; afterwards the cohort is still answerable.
- ``schema-breaking-payload-refused``: a payload the ``responseSchema`` refuses is refused (or
  re-asked), and the question is still answerable.
- ``resume-same-thread``: the scenario's answer, a ``resume`` covering the cohort on the same
  thread, continues the run: ``RUN_STARTED`` and ``RUN_FINISHED`` name the thread.
- ``identical-replay-safe``: the same ``resume`` sent again (a client retrying) is not refused,
  ends as the answer did and produces no new item (no text, tool call or tool result the
  answer did not): nothing is done twice.
- ``stale-resume-refused``: a ``resume`` for the interrupt already answered, with another
  decision (``cancelled``), is refused, and the agent does not run.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pausemesh.conformance.agui_thread import ClientThread, breaking_answer, valid_answer
from pausemesh.conformance.sse import ConformanceError, Frame, Reply, Target

__all__ = ("RULES", "Endpoints", "Scenario", "Verdict", "check_agui")

RULES: tuple[str, ...] = (
    "interrupt-snapshots",
    "restore-by-connect",
    "reconnect-last-event-id",
    "pending-blocks-new-input",
    "partial-cohort-refused",
    "schema-breaking-payload-refused",
    "resume-same-thread",
    "identical-replay-safe",
    "stale-resume-refused",
)

Status = Literal["PASS", "FAIL", "N/A"]
_ABSENT_ROUTE = frozenset({404, 405})


@dataclass(frozen=True, slots=True)
class Verdict:
    """One rule's result: ``PASS``, ``FAIL`` (what was seen) or ``N/A`` (why)."""

    rule: str
    status: Status
    detail: str

    def line(self) -> str:
        return f"{self.status:<4} {self.rule}: {self.detail}"


@dataclass(frozen=True, slots=True)
class Scenario:
    """What to say so that the agent asks, and how to answer (defaults from the schema)."""

    message: str = "Hello"
    answer: Any = None
    invalid_answer: Any = None
    follow_up: str = "A new message while the question is open"
    state: Any = field(default_factory=dict)
    forwarded_props: Any = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Scenario:
        known = {
            "message": "message",
            "answer": "answer",
            "invalidAnswer": "invalid_answer",
            "followUp": "follow_up",
            "state": "state",
            "forwardedProps": "forwarded_props",
        }
        unknown = sorted(set(data) - set(known))
        if unknown:
            msg = f"unknown scenario fields {unknown}; known: {sorted(known)}"
            raise ConformanceError(msg)
        return cls(**{known[key]: value for key, value in data.items()})


@dataclass(frozen=True, slots=True)
class Endpoints:
    """The run URL and the two resumability routes (``{threadId}`` is filled in)."""

    run: str
    connect: str
    events: str

    def events_for(self, thread_id: str) -> str:
        return self.events.replace("{threadId}", thread_id)


@dataclass(slots=True)
class _Asked:
    """A thread whose last run ended with questions."""

    thread: ClientThread
    reply: Reply

    @property
    def interrupt_ids(self) -> list[str]:
        return [str(i.get("id")) for i in self.reply.interrupts]


class _Checker:
    def __init__(self, target: Target, endpoints: Endpoints, scenario: Scenario) -> None:
        self.target = target
        self.endpoints = endpoints
        self.scenario = scenario

    def post(self, body: Mapping[str, Any]) -> Reply:
        """One run on the run endpoint (the body names its thread)."""
        return self.target.post(self.endpoints.run, body)

    def ask(self) -> _Asked:
        """A new thread on the scenario's message, whose run must end with questions."""
        thread = ClientThread(self.scenario.state, self.scenario.forwarded_props)
        thread.say(self.scenario.message)
        reply = self.post(thread.body())
        if reply.outcome != "interrupt" or not reply.interrupts:
            msg = (
                f"the scenario's run did not end with an interrupt ({reply.describe()}): give a"
                " message that makes the agent ask (--message or the scenario file)"
            )
            raise ConformanceError(msg)
        thread.apply(reply)
        return _Asked(thread, reply)

    def answers(self, interrupts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        entries = []
        for interrupt in interrupts:
            payload = valid_answer(interrupt, self.scenario.answer)
            if payload is None:
                msg = f"no answer fits the question {interrupt.get('id')!r}: give --answer"
                raise ConformanceError(msg)
            entries.append(
                {"interruptId": interrupt.get("id"), "status": "resolved", "payload": payload}
            )
        return entries

    # -- the rules ------------------------------------------------------------------------

    def snapshots(self, asked: _Asked) -> Verdict:
        rule = "interrupt-snapshots"
        kinds = [e.get("type") for e in asked.reply.events]
        last = len(kinds) - 1 - kinds[::-1].index("RUN_FINISHED")
        missing = [k for k in ("MESSAGES_SNAPSHOT", "STATE_SNAPSHOT") if k not in kinds[:last]]
        if missing:
            return Verdict(
                rule, "FAIL", f"no {' and no '.join(missing)} before the interrupting RUN_FINISHED"
            )
        return Verdict(
            rule,
            "PASS",
            "MESSAGES_SNAPSHOT and STATE_SNAPSHOT before the interrupting RUN_FINISHED",
        )

    def restore(self, asked: _Asked) -> Verdict:
        rule = "restore-by-connect"
        url = self.endpoints.connect
        fresh = {
            "threadId": asked.thread.thread_id,
            "runId": f"conformance-connect-{uuid.uuid4()}",
            "messages": [],
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        reply = self.target.post(url, fresh)
        if reply.status in _ABSENT_ROUTE:
            return Verdict(
                rule,
                "N/A",
                f"POST {url} answered {reply.status}: no restore route (AG-UI 1.0 defines none)",
            )
        if reply.refusal is not None:
            return Verdict(rule, "FAIL", f"POST {url}: {reply.refusal}")
        said = reply.agent_output()
        if said:
            return Verdict(rule, "FAIL", f"the connect ran the agent ({', '.join(said[:3])})")
        restored = [str(i.get("id")) for i in reply.interrupts]
        if restored != asked.interrupt_ids:
            return Verdict(
                rule,
                "FAIL",
                f"the restored pending interrupts are {restored}, not {asked.interrupt_ids}"
                f" ({reply.describe()})",
            )
        sent = {m["id"] for m in asked.thread.messages if m.get("role") == "user"}
        snapshots = [e for e in reply.events if e.get("type") == "MESSAGES_SNAPSHOT"]
        got = {m.get("id") for m in snapshots[-1].get("messages", [])} if snapshots else set()
        if not sent <= got:
            return Verdict(rule, "FAIL", "the restored messages lack the user's message")
        return Verdict(
            rule,
            "PASS",
            f"a fresh client restored the messages and {len(restored)} pending interrupt(s)"
            " without running the agent",
        )

    def reconnect(self, asked: _Asked) -> Verdict:
        rule = "reconnect-last-event-id"
        frames = asked.reply.frames
        if all(f.id is None for f in frames):
            return Verdict(
                rule,
                "N/A",
                "the run's frames carry no id: (AG-UI 1.0's HTTP binding has no resumption)",
            )
        if any(f.id is None for f in frames):
            return Verdict(rule, "FAIL", "some of the run's frames carry no id:")
        cursor = frames[len(frames) // 2 - 1] if len(frames) > 1 else frames[0]
        later = frames[frames.index(cursor) + 1 :]
        url = self.endpoints.events_for(asked.thread.thread_id)
        reply = self.target.tail(url, cursor.id or "", until_id=frames[-1].id or "")
        if reply.status in _ABSENT_ROUTE:
            return Verdict(
                rule, "N/A", f"the frames carry ids, but GET {url} answered {reply.status}"
            )
        if reply.refusal is not None:
            return Verdict(
                rule, "FAIL", f"GET {url} with Last-Event-ID: {cursor.id}: {reply.refusal}"
            )
        problem = _replay_difference(later, reply.frames)
        if problem is not None:
            return Verdict(rule, "FAIL", f"GET {url} with Last-Event-ID: {cursor.id}: {problem}")
        return Verdict(
            rule,
            "PASS",
            f"with Last-Event-ID: {cursor.id} the events route sent the {len(reply.frames)}"
            " later frames again, the same, through the interrupting RUN_FINISHED",
        )

    def refused_then_answerable(
        self, rule: str, asked: _Asked, body: Mapping[str, Any], what: str
    ) -> Verdict:
        """The probe ``body`` on an open cohort must be refused or re-ask every open question;
        then the scenario's answer must still be taken."""
        reply = self.post(body)
        refused = reply.refusal
        reasked = reply.outcome == "interrupt" and set(asked.interrupt_ids) <= {
            str(i.get("id")) for i in reply.interrupts
        }
        if refused is None and not reasked:
            left = "" if reply.outcome != "success" else ": the open question was dropped"
            return Verdict(rule, "FAIL", f"{what} was taken ({reply.describe()}){left}")
        still_open = reply.interrupts if reasked else asked.reply.interrupts
        seen = f"refused ({refused})" if refused is not None else "re-asked the open interrupts"
        answer = self.post(asked.thread.body(self.answers(still_open)))
        if answer.refusal is not None or answer.terminal is None:
            return Verdict(
                rule,
                "FAIL",
                f"{what}: {seen}, but then the question could not be answered"
                f" ({answer.describe()})",
            )
        return Verdict(rule, "PASS", f"{what}: {seen}; the question was still answerable")

    def new_input(self, asked: _Asked) -> Verdict:
        before = list(asked.thread.messages)
        asked.thread.say(self.scenario.follow_up)
        body = asked.thread.body()
        asked.thread.messages = before  # the client takes its message back when refused
        return self.refused_then_answerable(
            "pending-blocks-new-input", asked, body, "a new message with no resume"
        )

    def partial(self, asked: _Asked) -> Verdict:
        entries = self.answers(asked.reply.interrupts)
        if len(entries) > 1:
            part, what = entries[:1], f"a resume answering 1 of {len(entries)} interrupts"
        else:
            unknown = {**entries[0], "interruptId": f"conformance-unknown-{uuid.uuid4()}"}
            part, what = [unknown], "a resume leaving the one open interrupt out"
        return self.refused_then_answerable(
            "partial-cohort-refused", asked, asked.thread.body(part), what
        )

    def breaking(self, asked: _Asked) -> Verdict:
        rule = "schema-breaking-payload-refused"
        interrupts = asked.reply.interrupts
        schemas = [i for i in interrupts if isinstance(i.get("responseSchema"), Mapping)]
        if not schemas:
            return Verdict(rule, "N/A", "no interrupt of the scenario carries a responseSchema")
        entries = self.answers(interrupts)
        for index, interrupt in enumerate(interrupts):
            payload = breaking_answer(interrupt, self.scenario.invalid_answer)
            if payload is not None:
                entries[index] = {**entries[index], "payload": payload}
                what = f"the payload {_short(payload)} (against the responseSchema)"
                return self.refused_then_answerable(rule, asked, asked.thread.body(entries), what)
        return Verdict(
            rule, "N/A", "the responseSchema accepts every probe payload: give invalidAnswer"
        )

    def answered(self, asked: _Asked) -> Iterator[Verdict]:
        """``resume-same-thread``, then ``identical-replay-safe`` and ``stale-resume-refused``."""
        thread = asked.thread
        entries = self.answers(asked.reply.interrupts)
        body = thread.body(entries)
        answer = self.post(body)
        verdict = _same_thread(thread.thread_id, answer)
        yield verdict
        if verdict.status != "PASS":
            why = "the answer itself did not continue the thread"
            yield Verdict("identical-replay-safe", "N/A", why)
            yield Verdict("stale-resume-refused", "N/A", why)
            return
        thread.apply(answer)
        yield _replay_safe(answer, self.post({**body, "runId": f"{body['runId']}-again"}))
        flipped = [{"interruptId": e["interruptId"], "status": "cancelled"} for e in entries]
        stale = self.post(thread.body(flipped))
        if stale.refusal is not None and not stale.agent_output():
            yield Verdict(
                "stale-resume-refused",
                "PASS",
                f"cancelling the answered interrupt was refused ({stale.refusal})",
            )
        else:
            yield Verdict(
                "stale-resume-refused",
                "FAIL",
                f"cancelling the answered interrupt was taken ({stale.describe()})",
            )


def _same_thread(thread_id: str, answer: Reply) -> Verdict:
    rule = "resume-same-thread"
    if answer.refusal is not None:
        return Verdict(rule, "FAIL", f"the scenario's answer was refused ({answer.refusal})")
    started = next((e for e in answer.events if e.get("type") == "RUN_STARTED"), None)
    end = answer.terminal
    if started is None or end is None or end.get("type") != "RUN_FINISHED":
        return Verdict(rule, "FAIL", f"the answer's run was not a whole run ({answer.describe()})")
    names = {started.get("threadId"), end.get("threadId")}
    if names != {thread_id}:
        return Verdict(rule, "FAIL", f"the resumed run names thread(s) {sorted(map(str, names))}")
    return Verdict(rule, "PASS", f"the answer continued the thread: RUN_FINISHED {answer.outcome}")


def _replay_safe(answer: Reply, replay: Reply) -> Verdict:
    rule = "identical-replay-safe"
    if replay.refusal is not None:
        return Verdict(rule, "FAIL", f"the identical resume again was refused ({replay.refusal})")
    before = set(answer.agent_output())
    new = [item for item in replay.agent_output() if item not in before]
    if new:
        return Verdict(
            rule, "FAIL", f"the identical resume again ran the agent again ({', '.join(new[:3])})"
        )
    if replay.outcome != answer.outcome:
        return Verdict(
            rule, "FAIL", f"the identical resume again ended {replay.outcome}, not {answer.outcome}"
        )
    return Verdict(
        rule, "PASS", f"the identical resume again: RUN_FINISHED {replay.outcome}, no new item"
    )


def _replay_difference(sent: Sequence[Frame], again: Sequence[Frame]) -> str | None:
    """Why ``again`` (read after a cursor) is not the frames ``sent`` after it, or None. Frames
    may have been compacted (fewer), never changed, reordered or missing the last."""
    by_id = {f.id: f.data for f in sent}
    order = {f.id: n for n, f in enumerate(sent)}
    position = -1
    for frame in again:
        if frame.id not in order:
            return f"frame id {frame.id} was not sent after the cursor"
        if order[frame.id] <= position:
            return f"frame id {frame.id} came out of order"
        if by_id[frame.id] != frame.data:
            return f"frame id {frame.id} differs: {frame.data[:80]}"
        position = order[frame.id]
    if not again or again[-1].id != sent[-1].id:
        got = again[-1].id if again else "nothing"
        return f"the replay ended at {got}, not at the run's last frame {sent[-1].id}"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_agui(target: Target, endpoints: Endpoints, scenario: Scenario) -> list[Verdict]:
    """Every rule of ``RULES``, in order, against the server (raises ``ConformanceError`` when
    the scenario's run does not end with a question)."""
    checker = _Checker(target, endpoints, scenario)
    first = checker.ask()
    verdicts = [checker.snapshots(first), checker.restore(first), checker.reconnect(first)]
    probes: Sequence[Callable[[_Asked], Verdict]] = (
        checker.new_input,
        checker.partial,
        checker.breaking,
    )
    verdicts += [probe(checker.ask()) for probe in probes]
    verdicts += list(checker.answered(first))
    return verdicts
