"""The PostgreSQL schema: ordered migrations, the ledger, and what readiness expects to find.

Migrations are applied only by ``migrate()`` (``pausemesh migrate``), run by a DDL role; the
app never runs DDL. Statements use ``{schema}`` for the quoted schema name, so a migration's
checksum does not depend on the schema a deployment chose.
"""

from __future__ import annotations

import re

from pausemesh.core.errors import InvalidInputError
from pausemesh.stores.migrations import Migration
from pausemesh.stores.postgres.schema_message_times import MESSAGE_TIMES
from pausemesh.stores.postgres.schema_messages import THREAD_MESSAGES, THREAD_MESSAGES_OBJECTS
from pausemesh.stores.postgres.schema_queue import THREAD_QUEUE, THREAD_QUEUE_OBJECTS
from pausemesh.stores.postgres.schema_removed_messages import (
    REMOVED_MESSAGES,
    REMOVED_MESSAGES_OBJECTS,
)
from pausemesh.stores.postgres.schema_thread_state import THREAD_STATE, THREAD_STATE_OBJECTS

__all__ = (
    "DEFAULT_SCHEMA",
    "LEDGER_DDL",
    "LEDGER_TABLE",
    "MIGRATION_LOCK_KEY",
    "POSTGRES_MIGRATIONS",
    "expected_tables",
    "expected_triggers",
    "quote_schema",
    "render",
)

DEFAULT_SCHEMA = "pausemesh"
LEDGER_TABLE = "pausemesh_schema_migrations"
# pg_advisory_xact_lock(key1, key2): "PMSH" and the lock's purpose (1 = migrations).
MIGRATION_LOCK_KEY = (0x504D5348, 1)

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_MAX_SAFE = "9007199254740991"


def quote_schema(schema: str) -> str:
    """Validate a schema name and return it double-quoted (values are always parameters)."""
    if not isinstance(schema, str) or _SCHEMA_NAME.fullmatch(schema) is None:
        msg = "schema must match [A-Za-z_][A-Za-z0-9_]{0,62}"
        raise InvalidInputError(msg, code="INVALID_SCHEMA_NAME")
    return f'"{schema}"'


def render(statement: str, schema: str) -> str:
    # str.replace, not str.format: function bodies may contain braces.
    return statement.replace("{schema}", quote_schema(schema))


LEDGER_DDL = f"""
CREATE TABLE IF NOT EXISTS {{schema}}.{LEDGER_TABLE} (
    version INTEGER PRIMARY KEY CHECK (version > 0),
    name TEXT NOT NULL,
    checksum TEXT NOT NULL CHECK (checksum ~ '^[a-f0-9]{{64}}$'),
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


def _no_update_delete(table: str, *, allow_update: bool = False) -> tuple[str, ...]:
    """Append-only triggers for ``table`` (heads keep UPDATE: the CAS moves them)."""
    row_events = "DELETE" if allow_update else "UPDATE OR DELETE"
    return (
        f"""
        CREATE TRIGGER pausemesh_{table}_no_mutation
            BEFORE {row_events} ON {{schema}}.{table}
            FOR EACH ROW EXECUTE FUNCTION {{schema}}.pausemesh_reject_mutation()
        """,
        f"""
        CREATE TRIGGER pausemesh_{table}_no_truncate
            BEFORE TRUNCATE ON {{schema}}.{table}
            FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.pausemesh_reject_mutation()
        """,
    )


_CONTINUATIONS = Migration(
    version=1,
    name="continuation_streams",
    statements=(
        """
        CREATE FUNCTION {schema}.pausemesh_reject_mutation() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'PauseMesh persistence is append-only (% on %)', TG_OP, TG_TABLE_NAME
                USING ERRCODE = 'P0001';
        END
        $$
        """,
        *_no_update_delete(LEDGER_TABLE),
        f"""
        CREATE TABLE {{schema}}.continuation_streams (
            continuation_id TEXT PRIMARY KEY,
            version BIGINT NOT NULL CHECK (version BETWEEN 1 AND {_MAX_SAFE}),
            -- the deadline while pending, NULL once settled (the expiry sweeper's index)
            pending_expires_at TIMESTAMPTZ
        )
        """,
        """
        CREATE INDEX continuation_streams_due
            ON {schema}.continuation_streams (pending_expires_at)
            WHERE pending_expires_at IS NOT NULL
        """,
        f"""
        CREATE TABLE {{schema}}.continuation_events (
            continuation_id TEXT NOT NULL
                REFERENCES {{schema}}.continuation_streams (continuation_id),
            version BIGINT NOT NULL CHECK (version BETWEEN 1 AND {_MAX_SAFE}),
            -- TEXT, not jsonb: replay reads back the exact snapshot that was written
            event_json TEXT NOT NULL CHECK (jsonb_typeof(event_json::jsonb) = 'object'),
            PRIMARY KEY (continuation_id, version)
        )
        """,
        *_no_update_delete("continuation_streams", allow_update=True),
        *_no_update_delete("continuation_events"),
    ),
)

_AGUI_THREADS = Migration(
    version=2,
    name="agui_threads",
    statements=(
        """
        CREATE TABLE {schema}.agui_threads (
            thread_id TEXT PRIMARY KEY,
            owner TEXT,
            -- what ``save`` writes (messages, state, open and closed cohort), one JSON object
            body_json TEXT NOT NULL CHECK (jsonb_typeof(body_json::jsonb) = 'object'),
            version BIGINT NOT NULL CHECK (version > 0),
            last_sequence BIGINT NOT NULL CHECK (last_sequence >= 0),
            created_at TIMESTAMPTZ NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL,
            lease_id TEXT,
            lease_run_id TEXT,
            lease_expires_at TIMESTAMPTZ
        )
        """,
        """
        CREATE TABLE {schema}.agui_thread_events (
            thread_id TEXT NOT NULL REFERENCES {schema}.agui_threads (thread_id),
            sequence BIGINT NOT NULL CHECK (sequence > 0),
            run_id TEXT NOT NULL,
            event_json TEXT NOT NULL,
            PRIMARY KEY (thread_id, sequence)
        )
        """,
        *_no_update_delete("agui_threads", allow_update=True),
        *_no_update_delete("agui_thread_events"),
    ),
)

_OPERATIONS = Migration(
    version=3,
    name="operations",
    statements=(
        """
        CREATE TABLE {schema}.operations (
            operation_id TEXT PRIMARY KEY,
            -- attempt order for listings, without trusting clocks
            position BIGINT GENERATED ALWAYS AS IDENTITY,
            domain TEXT NOT NULL,
            business_key TEXT NOT NULL,
            tool TEXT NOT NULL,
            arguments_json TEXT NOT NULL,
            terms_hash TEXT NOT NULL,
            attempt_id TEXT NOT NULL,
            attempted_at TIMESTAMPTZ NOT NULL,
            result_json TEXT,
            result_hash TEXT,
            completed_at TIMESTAMPTZ
        )
        """,
        "CREATE INDEX operations_by_domain ON {schema}.operations (domain, position)",
        """
        CREATE FUNCTION {schema}.pausemesh_outcome_write_once() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            -- the terms and attempt are fixed; the outcome is written exactly once
            IF OLD.result_hash IS NOT NULL
                OR (NEW.operation_id, NEW.position, NEW.domain, NEW.business_key, NEW.tool,
                    NEW.arguments_json, NEW.terms_hash, NEW.attempt_id, NEW.attempted_at)
                   IS DISTINCT FROM
                   (OLD.operation_id, OLD.position, OLD.domain, OLD.business_key, OLD.tool,
                    OLD.arguments_json, OLD.terms_hash, OLD.attempt_id, OLD.attempted_at)
            THEN
                RAISE EXCEPTION 'PauseMesh operation terms and outcomes are write-once'
                    USING ERRCODE = 'P0001';
            END IF;
            RETURN NEW;
        END
        $$
        """,
        """
        CREATE TRIGGER pausemesh_operations_write_once BEFORE UPDATE ON {schema}.operations
            FOR EACH ROW EXECUTE FUNCTION {schema}.pausemesh_outcome_write_once()
        """,
        *_no_update_delete("operations", allow_update=True),
    ),
)

_GATEWAY = Migration(
    version=4,
    name="gateway_fencing",
    statements=(
        """
        CREATE TABLE {schema}.gateway_workers (
            domain TEXT NOT NULL,
            worker TEXT NOT NULL,
            -- the fencing epoch; only a holder of the current one may begin or record
            epoch BIGINT NOT NULL CHECK (epoch > 0),
            updated_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (domain, worker)
        )
        """,
        """
        CREATE FUNCTION {schema}.pausemesh_epoch_advances() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.epoch <= OLD.epoch OR (NEW.domain, NEW.worker) IS DISTINCT FROM
                                          (OLD.domain, OLD.worker) THEN
                RAISE EXCEPTION 'PauseMesh worker epochs only advance' USING ERRCODE = 'P0001';
            END IF;
            RETURN NEW;
        END
        $$
        """,
        """
        CREATE TRIGGER pausemesh_gateway_workers_epoch_advances
            BEFORE UPDATE ON {schema}.gateway_workers
            FOR EACH ROW EXECUTE FUNCTION {schema}.pausemesh_epoch_advances()
        """,
        *_no_update_delete("gateway_workers", allow_update=True),
        """
        CREATE TABLE {schema}.gateway_dispatches (
            operation_id TEXT PRIMARY KEY REFERENCES {schema}.operations (operation_id),
            worker TEXT NOT NULL,
            epoch BIGINT NOT NULL,
            job TEXT NOT NULL,
            dispatched_at TIMESTAMPTZ NOT NULL
        )
        """,
        """
        CREATE TABLE {schema}.operation_resolutions (
            operation_id TEXT PRIMARY KEY REFERENCES {schema}.operations (operation_id),
            resolved_by TEXT NOT NULL,
            reason TEXT NOT NULL,
            resolved_at TIMESTAMPTZ NOT NULL
        )
        """,
        *_no_update_delete("gateway_dispatches"),
        *_no_update_delete("operation_resolutions"),
    ),
)

_RECOVERIES = Migration(
    version=5,
    name="operation_recoveries",
    statements=(
        """
        CREATE TABLE {schema}.operation_recoveries (
            position BIGINT GENERATED ALWAYS AS IDENTITY,
            operation_id TEXT NOT NULL REFERENCES {schema}.operations (operation_id),
            -- RESENT is claimed before the one resend; RECOVERED comes with the outcome
            step TEXT NOT NULL CHECK (step IN ('RECOVERED', 'RESENT')),
            recorded_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (operation_id, step)
        )
        """,
        *_no_update_delete("operation_recoveries"),
    ),
)

_THREAD_LIFECYCLE = Migration(
    version=6,
    name="thread_lifecycle",
    statements=(
        "ALTER TABLE {schema}.agui_threads ADD COLUMN title TEXT",
        # The open cohort's latest deadline (NULL without one): the expiry sweeper's index.
        "ALTER TABLE {schema}.agui_threads ADD COLUMN open_deadline TIMESTAMPTZ",
        """
        CREATE INDEX agui_threads_open_deadline ON {schema}.agui_threads (open_deadline)
            WHERE open_deadline IS NOT NULL
        """,
        # The thread list: one owner's threads, newest first, keyset-paginated. On the owner
        # with NULL (no auth) as '' (never a principal): ``owner IS NULL`` would find the rows
        # but not in index order, so every page would sort.
        """
        CREATE INDEX agui_threads_by_owner
            ON {schema}.agui_threads ((coalesce(owner, '')), updated_at DESC, thread_id DESC)
        """,
        # Retention: the threads idle the longest.
        "CREATE INDEX agui_threads_by_updated ON {schema}.agui_threads (updated_at)",
        # The erasure ledger (the audit): ids and times only, never content.
        """
        CREATE TABLE {schema}.agui_thread_erasures (
            thread_id TEXT PRIMARY KEY,
            erased_at TIMESTAMPTZ NOT NULL
        )
        """,
        *_no_update_delete("agui_thread_erasures"),
        """
        CREATE FUNCTION {schema}.pausemesh_reject_unerased_delete() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            IF EXISTS (SELECT 1 FROM {schema}.agui_thread_erasures e
                       WHERE e.thread_id = OLD.thread_id) THEN
                RETURN OLD;
            END IF;
            RAISE EXCEPTION 'PauseMesh persistence is append-only (% on %)', TG_OP, TG_TABLE_NAME
                USING ERRCODE = 'P0001';
        END
        $$
        """,
        # Threads and their logs: DELETE only for a thread in the ledger; UPDATE of a log
        # entry and TRUNCATE stay refused.
        "DROP TRIGGER pausemesh_agui_threads_no_mutation ON {schema}.agui_threads",
        "DROP TRIGGER pausemesh_agui_thread_events_no_mutation ON {schema}.agui_thread_events",
        """
        CREATE TRIGGER pausemesh_agui_thread_events_no_mutation
            BEFORE UPDATE ON {schema}.agui_thread_events
            FOR EACH ROW EXECUTE FUNCTION {schema}.pausemesh_reject_mutation()
        """,
        """
        CREATE TRIGGER pausemesh_agui_threads_erase_only
            BEFORE DELETE ON {schema}.agui_threads
            FOR EACH ROW EXECUTE FUNCTION {schema}.pausemesh_reject_unerased_delete()
        """,
        """
        CREATE TRIGGER pausemesh_agui_thread_events_erase_only
            BEFORE DELETE ON {schema}.agui_thread_events
            FOR EACH ROW EXECUTE FUNCTION {schema}.pausemesh_reject_unerased_delete()
        """,
        # The one erase path: the runtime role has no DELETE privilege; it may EXECUTE this
        # function, which runs as its owner (the migration role), records the erasure, then
        # deletes exactly that thread's log and record.
        """
        CREATE FUNCTION {schema}.pausemesh_erase_thread(p_thread_id TEXT, p_at TIMESTAMPTZ)
        RETURNS BOOLEAN
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        DECLARE
            erased INTEGER;
        BEGIN
            INSERT INTO {schema}.agui_thread_erasures (thread_id, erased_at)
                VALUES (p_thread_id, p_at) ON CONFLICT DO NOTHING;
            DELETE FROM {schema}.agui_thread_events WHERE thread_id = p_thread_id;
            DELETE FROM {schema}.agui_threads WHERE thread_id = p_thread_id;
            GET DIAGNOSTICS erased = ROW_COUNT;
            RETURN erased = 1;
        END
        $$
        """,
        # Functions are executable by PUBLIC by default; only granted roles may erase.
        """
        REVOKE EXECUTE ON FUNCTION {schema}.pausemesh_erase_thread(TEXT, TIMESTAMPTZ)
            FROM PUBLIC
        """,
    ),
)

_RATE_LIMITS = Migration(
    version=7,
    name="rate_limits",
    statements=(
        # PAUSEMESH_RATE_LIMIT's fixed windows, one row per principal (or client address) and
        # period, shared by every replica. Counters, not history: UPDATE is their purpose.
        # UNLOGGED: a check writes no WAL and waits for no flush; a crash only resets the
        # windows, which is all a rate limit can lose.
        """
        CREATE UNLOGGED TABLE {schema}.rate_limits (
            bucket TEXT PRIMARY KEY,
            window_index BIGINT NOT NULL,
            hits INTEGER NOT NULL CHECK (hits > 0)
        )
        """,
        """
        CREATE TRIGGER pausemesh_rate_limits_no_truncate
            BEFORE TRUNCATE ON {schema}.rate_limits
            FOR EACH STATEMENT EXECUTE FUNCTION {schema}.pausemesh_reject_mutation()
        """,
    ),
)

# Migration 9 (7 and 8 are taken on other lines of work). Configurations are retired, never
# deleted; deliveries are settled in place: the runtime role needs no DELETE. Both take
# UPDATE, so only TRUNCATE is refused by trigger.
_A2A_PUSH = Migration(
    version=9,
    name="a2a_push",
    statements=(
        """
        CREATE TABLE {schema}.a2a_push_configs (
            task_id TEXT NOT NULL,
            config_id TEXT NOT NULL,
            owner TEXT,
            config_json TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL,
            retired_at TIMESTAMPTZ,
            PRIMARY KEY (task_id, config_id)
        )
        """,
        # The outbox: one row per (state change, webhook). ``next_attempt_at`` is NULL once
        # settled (delivered or given up); a lease marks the replica sending it.
        """
        CREATE TABLE {schema}.a2a_push_deliveries (
            delivery_id TEXT PRIMARY KEY,
            task_id TEXT NOT NULL,
            config_json TEXT NOT NULL,
            payload_json TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at TIMESTAMPTZ,
            lease_holder TEXT,
            lease_until TIMESTAMPTZ,
            delivered_at TIMESTAMPTZ,
            last_error TEXT
        )
        """,
        """
        CREATE INDEX a2a_push_deliveries_due ON {schema}.a2a_push_deliveries (next_attempt_at)
            WHERE next_attempt_at IS NOT NULL
        """,
        """
        CREATE TRIGGER pausemesh_a2a_push_configs_no_truncate
            BEFORE TRUNCATE ON {schema}.a2a_push_configs
            FOR EACH STATEMENT EXECUTE FUNCTION {schema}.pausemesh_reject_mutation()
        """,
        """
        CREATE TRIGGER pausemesh_a2a_push_deliveries_no_truncate
            BEFORE TRUNCATE ON {schema}.a2a_push_deliveries
            FOR EACH STATEMENT EXECUTE FUNCTION {schema}.pausemesh_reject_mutation()
        """,
    ),
)

_APPROVALS = Migration(
    version=8,
    name="approvals",
    statements=(
        # The thread an out-of-band decision continues, until its run is done: written by the
        # same statement as the decision, so a decision is never without its owed run.
        "ALTER TABLE {schema}.continuation_streams ADD COLUMN owed_thread TEXT",
        """
        CREATE INDEX continuation_streams_owed
            ON {schema}.continuation_streams (continuation_id)
            WHERE owed_thread IS NOT NULL
        """,
        # Who may decide a pause (principal ids and role:NAME), for the approvals inbox.
        """
        CREATE TABLE {schema}.continuation_approvers (
            approver TEXT NOT NULL,
            continuation_id TEXT NOT NULL
                REFERENCES {schema}.continuation_streams (continuation_id),
            PRIMARY KEY (approver, continuation_id)
        )
        """,
        *_no_update_delete("continuation_approvers"),
    ),
)


# Migration 10 is SQLite only (thread changes). A process that tells a client OUTCOME_UNKNOWN
# declares it here first; a late reply is then refused (the fenced completion and the
# declaration both lock the operation's row, so they serialise).
_OPERATION_UNKNOWNS = Migration(
    version=11,
    name="operation_unknowns",
    statements=(
        """
        CREATE TABLE {schema}.operation_unknowns (
            operation_id TEXT PRIMARY KEY REFERENCES {schema}.operations (operation_id),
            declared_by TEXT NOT NULL,
            reason TEXT NOT NULL,
            declared_at TIMESTAMPTZ NOT NULL
        )
        """,
        *_no_update_delete("operation_unknowns"),
    ),
)

# Migration 12: who set a thread's title, so an
# agent's title replaces the derived one but never the owner's. Titles stored before it keep
# NULL (unknown source), which ``save`` treats like the owner's: it may be one.
_TITLE_SOURCE = Migration(
    version=12,
    name="thread_title_source",
    statements=(
        """
        ALTER TABLE {schema}.agui_threads ADD COLUMN title_source TEXT
            CHECK (title_source IN ('owner', 'agent', 'derived'))
        """,
    ),
)

# Migration 13: an erased thread's questions and answers leave the continuation log. The ledger
# (ids and times, no content) is the audit and what allows the one UPDATE a continuation event
# ever takes, its redaction; DELETE and TRUNCATE stay refused. The runtime role has no UPDATE on
# the log: it may only EXECUTE ``pausemesh_erase_continuations`` (SECURITY DEFINER), which
# erases exactly one owner's continuations of one correlation id (an erased thread's).
_CONTINUATION_ERASURE = Migration(
    version=13,
    name="continuation_erasure",
    statements=(
        """
        CREATE TABLE {schema}.continuation_erasures (
            continuation_id TEXT PRIMARY KEY
                REFERENCES {schema}.continuation_streams (continuation_id),
            erased_at TIMESTAMPTZ NOT NULL
        )
        """,
        *_no_update_delete("continuation_erasures"),
        # A thread's questions, found without a scan (created events only).
        """
        CREATE INDEX continuation_events_by_correlation
            ON {schema}.continuation_events ((event_json::jsonb ->> 'correlationId'))
            WHERE version = 1
        """,
        """
        CREATE FUNCTION {schema}.pausemesh_reject_unerased_update() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.continuation_id = OLD.continuation_id AND NEW.version = OLD.version
               AND EXISTS (SELECT 1 FROM {schema}.continuation_erasures e
                           WHERE e.continuation_id = OLD.continuation_id) THEN
                RETURN NEW;
            END IF;
            RAISE EXCEPTION 'PauseMesh persistence is append-only (% on %)', TG_OP, TG_TABLE_NAME
                USING ERRCODE = 'P0001';
        END
        $$
        """,
        "DROP TRIGGER pausemesh_continuation_events_no_mutation ON {schema}.continuation_events",
        """
        CREATE TRIGGER pausemesh_continuation_events_no_mutation
            BEFORE DELETE ON {schema}.continuation_events
            FOR EACH ROW EXECUTE FUNCTION {schema}.pausemesh_reject_mutation()
        """,
        """
        CREATE TRIGGER pausemesh_continuation_events_erase_only
            BEFORE UPDATE ON {schema}.continuation_events
            FOR EACH ROW EXECUTE FUNCTION {schema}.pausemesh_reject_unerased_update()
        """,
        """
        CREATE FUNCTION {schema}.pausemesh_erase_continuations(
            p_correlation_id TEXT, p_owner TEXT, p_at TIMESTAMPTZ
        ) RETURNS INTEGER
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        DECLARE
            ids TEXT[];
        BEGIN
            SELECT coalesce(array_agg(e.continuation_id), '{}') INTO ids
                FROM {schema}.continuation_events e
                WHERE e.version = 1
                  AND (e.event_json::jsonb ->> 'correlationId') = p_correlation_id
                  AND (e.event_json::jsonb ->> 'owner') IS NOT DISTINCT FROM p_owner
                  AND NOT EXISTS (SELECT 1 FROM {schema}.continuation_erasures x
                                  WHERE x.continuation_id = e.continuation_id);
            INSERT INTO {schema}.continuation_erasures (continuation_id, erased_at)
                SELECT unnest(ids), p_at;
            UPDATE {schema}.continuation_events e SET event_json = (
                CASE e.event_json::jsonb ->> 'type'
                WHEN 'continuation.created'
                    THEN e.event_json::jsonb || '{"payload": null, "metadata": {}}'::jsonb
                ELSE e.event_json::jsonb || '{"resumePayload": null}'::jsonb
                END)::text
            WHERE e.continuation_id = ANY(ids)
              AND (e.event_json::jsonb ->> 'type')
                  IN ('continuation.created', 'continuation.resumed');
            RETURN cardinality(ids);
        END
        $$
        """,
        """
        REVOKE EXECUTE ON FUNCTION
            {schema}.pausemesh_erase_continuations(TEXT, TEXT, TIMESTAMPTZ) FROM PUBLIC
        """,
    ),
)


# Numbered resends (issue 18): a resend that itself died before reaching the target may be
# followed by another after a fresh "never saw it" (``core/operations.next_resend``). Adding a
# column with a constant default rewrites nothing and fires no row trigger.
_RESEND_NUMBERS = Migration(
    version=14,
    name="operation_resend_numbers",
    statements=(
        """
        ALTER TABLE {schema}.operation_recoveries
            ADD COLUMN number INTEGER NOT NULL DEFAULT 1 CHECK (number >= 1)
        """,
        "ALTER TABLE {schema}.operation_recoveries DROP CONSTRAINT operation_recoveries_pkey",
        "ALTER TABLE {schema}.operation_recoveries ADD PRIMARY KEY (operation_id, step, number)",
    ),
)

# Migration 20 (numbers between are left to other lines of work). The push outbox becomes the
# one outbox: each row names its channel (``a2a``: A2A push notifications, every row before;
# ``webhook``: the event webhooks of ``core/webhooks.py``); each channel's dispatcher claims
# its own rows on their own index. A constant default rewrites nothing.
_OUTBOX_CHANNELS = Migration(
    version=20,
    name="outbox_channels",
    statements=(
        "ALTER TABLE {schema}.a2a_push_deliveries ADD COLUMN channel TEXT NOT NULL DEFAULT 'a2a'",
        "DROP INDEX {schema}.a2a_push_deliveries_due",
        """
        CREATE INDEX outbox_due ON {schema}.a2a_push_deliveries (channel, next_attempt_at)
            WHERE next_attempt_at IS NOT NULL
        """,
    ),
)

POSTGRES_MIGRATIONS: tuple[Migration, ...] = (
    _CONTINUATIONS,
    _AGUI_THREADS,
    _OPERATIONS,
    _GATEWAY,
    _RECOVERIES,
    _THREAD_LIFECYCLE,
    _RATE_LIMITS,
    _APPROVALS,
    _A2A_PUSH,
    _OPERATION_UNKNOWNS,
    _TITLE_SOURCE,
    _CONTINUATION_ERASURE,
    _RESEND_NUMBERS,
    _OUTBOX_CHANNELS,
    THREAD_MESSAGES,
    THREAD_QUEUE,
    MESSAGE_TIMES,
    REMOVED_MESSAGES,
    THREAD_STATE,
)

# What readiness checks is present: table -> (trigger names); kept beside the migrations so a
# new migration updates both in one place.
_OBJECTS: dict[int, dict[str, tuple[str, ...]]] = {
    1: {
        LEDGER_TABLE: (
            f"pausemesh_{LEDGER_TABLE}_no_mutation",
            f"pausemesh_{LEDGER_TABLE}_no_truncate",
        ),
        "continuation_streams": (
            "pausemesh_continuation_streams_no_mutation",
            "pausemesh_continuation_streams_no_truncate",
        ),
        "continuation_events": (
            "pausemesh_continuation_events_no_mutation",
            "pausemesh_continuation_events_no_truncate",
        ),
    },
    2: {
        "agui_threads": (
            "pausemesh_agui_threads_no_mutation",
            "pausemesh_agui_threads_no_truncate",
        ),
        "agui_thread_events": (
            "pausemesh_agui_thread_events_no_mutation",
            "pausemesh_agui_thread_events_no_truncate",
        ),
    },
    3: {
        "operations": ("pausemesh_operations_no_mutation", "pausemesh_operations_no_truncate"),
    },
    4: {
        "gateway_workers": (
            "pausemesh_gateway_workers_no_mutation",
            "pausemesh_gateway_workers_no_truncate",
        ),
        "gateway_dispatches": (
            "pausemesh_gateway_dispatches_no_mutation",
            "pausemesh_gateway_dispatches_no_truncate",
        ),
        "operation_resolutions": (
            "pausemesh_operation_resolutions_no_mutation",
            "pausemesh_operation_resolutions_no_truncate",
        ),
    },
    5: {
        "operation_recoveries": (
            "pausemesh_operation_recoveries_no_mutation",
            "pausemesh_operation_recoveries_no_truncate",
        ),
    },
    6: {
        "agui_threads": (
            "pausemesh_agui_threads_erase_only",
            "pausemesh_agui_threads_no_truncate",
        ),
        "agui_thread_events": (
            "pausemesh_agui_thread_events_no_mutation",
            "pausemesh_agui_thread_events_erase_only",
            "pausemesh_agui_thread_events_no_truncate",
        ),
        "agui_thread_erasures": (
            "pausemesh_agui_thread_erasures_no_mutation",
            "pausemesh_agui_thread_erasures_no_truncate",
        ),
    },
    7: {
        "rate_limits": ("pausemesh_rate_limits_no_truncate",),
    },
    8: {
        "continuation_approvers": (
            "pausemesh_continuation_approvers_no_mutation",
            "pausemesh_continuation_approvers_no_truncate",
        ),
    },
    9: {
        "a2a_push_configs": ("pausemesh_a2a_push_configs_no_truncate",),
        "a2a_push_deliveries": ("pausemesh_a2a_push_deliveries_no_truncate",),
    },
    11: {
        "operation_unknowns": (
            "pausemesh_operation_unknowns_no_mutation",
            "pausemesh_operation_unknowns_no_truncate",
        ),
    },
    13: {
        "continuation_events": (
            "pausemesh_continuation_events_no_mutation",
            "pausemesh_continuation_events_erase_only",
            "pausemesh_continuation_events_no_truncate",
        ),
        "continuation_erasures": (
            "pausemesh_continuation_erasures_no_mutation",
            "pausemesh_continuation_erasures_no_truncate",
        ),
    },
    42: THREAD_MESSAGES_OBJECTS,
    44: THREAD_QUEUE_OBJECTS,
    46: REMOVED_MESSAGES_OBJECTS,
    48: THREAD_STATE_OBJECTS,
}


def _objects(migrations: tuple[Migration, ...]) -> dict[str, tuple[str, ...]]:
    merged: dict[str, tuple[str, ...]] = {}
    for migration in migrations:
        merged.update(_OBJECTS.get(migration.version, {}))
    return merged


def expected_tables(migrations: tuple[Migration, ...] = POSTGRES_MIGRATIONS) -> frozenset[str]:
    return frozenset(_objects(migrations))


def expected_triggers(
    migrations: tuple[Migration, ...] = POSTGRES_MIGRATIONS,
) -> frozenset[tuple[str, str]]:
    return frozenset(
        (table, trigger) for table, triggers in _objects(migrations).items() for trigger in triggers
    )
