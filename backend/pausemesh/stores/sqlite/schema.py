"""The SQLite schema, as an ordered list of migrations (applied on open, inside one lock)."""

from __future__ import annotations

from pausemesh.stores.migrations import Migration
from pausemesh.stores.sqlite.schema_message_times import MESSAGE_TIMES
from pausemesh.stores.sqlite.schema_messages import THREAD_MESSAGES
from pausemesh.stores.sqlite.schema_queue import THREAD_QUEUE
from pausemesh.stores.sqlite.schema_removed_messages import REMOVED_MESSAGES
from pausemesh.stores.sqlite.schema_thread_state import THREAD_STATE

__all__ = ("SQLITE_MIGRATIONS",)


def _append_only(table: str) -> tuple[str, ...]:
    """The two triggers that refuse UPDATE and DELETE on ``table`` (its rows are write-once)."""
    return tuple(
        f"""
        CREATE TRIGGER {table}_no_{verb} BEFORE {verb.upper()} ON {table}
        BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END
        """
        for verb in ("update", "delete")
    )


_CONTINUATIONS = Migration(
    version=1,
    name="continuation_streams",
    statements=(
        """
        CREATE TABLE continuation_streams (
            continuation_id TEXT PRIMARY KEY,
            version INTEGER NOT NULL CHECK (version >= 0),
            -- deadline in epoch microseconds while pending, NULL once settled (sweeper index)
            pending_expires_at_us INTEGER
        ) STRICT
        """,
        """
        CREATE INDEX continuation_streams_due
            ON continuation_streams (pending_expires_at_us)
            WHERE pending_expires_at_us IS NOT NULL
        """,
        """
        CREATE TABLE continuation_events (
            continuation_id TEXT NOT NULL REFERENCES continuation_streams (continuation_id),
            version INTEGER NOT NULL CHECK (version > 0),
            event_json TEXT NOT NULL CHECK (json_valid(event_json)),
            PRIMARY KEY (continuation_id, version)
        ) STRICT, WITHOUT ROWID
        """,
        *_append_only("continuation_events"),
        """
        CREATE TRIGGER continuation_streams_no_delete BEFORE DELETE ON continuation_streams
        BEGIN SELECT RAISE(ABORT, 'continuation_streams rows are never deleted'); END
        """,
    ),
)

_AGUI_THREADS = Migration(
    version=2,
    name="agui_threads",
    statements=(
        """
        CREATE TABLE agui_threads (
            thread_id TEXT PRIMARY KEY,
            owner TEXT,
            messages_json TEXT NOT NULL CHECK (json_valid(messages_json)),
            state_json TEXT NOT NULL CHECK (json_valid(state_json)),
            -- the open interrupt cohort's receipt; NULL when no cohort is open
            open_receipt_json TEXT CHECK (open_receipt_json IS NULL OR json_valid(open_receipt_json)),
            -- the last closed cohort, kept so a replayed resume is recognized (idempotent or refused)
            closed_receipt_json TEXT
                CHECK (closed_receipt_json IS NULL OR json_valid(closed_receipt_json)),
            version INTEGER NOT NULL CHECK (version > 0),
            last_sequence INTEGER NOT NULL CHECK (last_sequence >= 0),
            created_at_us INTEGER NOT NULL,
            updated_at_us INTEGER NOT NULL,
            lease_id TEXT,
            lease_run_id TEXT,
            lease_expires_at_us INTEGER
        ) STRICT
        """,
        """
        CREATE TABLE agui_thread_events (
            thread_id TEXT NOT NULL REFERENCES agui_threads (thread_id),
            sequence INTEGER NOT NULL CHECK (sequence > 0),
            run_id TEXT NOT NULL,
            event_json TEXT NOT NULL CHECK (json_valid(event_json)),
            PRIMARY KEY (thread_id, sequence)
        ) STRICT, WITHOUT ROWID
        """,
        *_append_only("agui_thread_events"),
    ),
)

_OPERATIONS = Migration(
    version=3,
    name="operations",
    statements=(
        """
        CREATE TABLE operations (
            operation_id TEXT PRIMARY KEY,
            domain TEXT NOT NULL,
            business_key TEXT NOT NULL,
            tool TEXT NOT NULL,
            arguments_json TEXT NOT NULL CHECK (json_valid(arguments_json)),
            terms_hash TEXT NOT NULL,
            attempt_id TEXT NOT NULL,
            attempted_at_us INTEGER NOT NULL,
            -- the outcome, written once; NULL while it is unknown
            result_json TEXT CHECK (result_json IS NULL OR json_valid(result_json)),
            result_hash TEXT,
            completed_at_us INTEGER,
            UNIQUE (domain, business_key)
        ) STRICT
        """,
        """
        CREATE TRIGGER operations_write_once BEFORE UPDATE ON operations
        WHEN OLD.result_hash IS NOT NULL
            OR NEW.operation_id IS NOT OLD.operation_id OR NEW.domain IS NOT OLD.domain
            OR NEW.business_key IS NOT OLD.business_key OR NEW.tool IS NOT OLD.tool
            OR NEW.arguments_json IS NOT OLD.arguments_json
            OR NEW.terms_hash IS NOT OLD.terms_hash OR NEW.attempt_id IS NOT OLD.attempt_id
            OR NEW.attempted_at_us IS NOT OLD.attempted_at_us
        BEGIN SELECT RAISE(ABORT, 'operations: terms and outcomes are write-once'); END
        """,
        """
        CREATE TRIGGER operations_no_delete BEFORE DELETE ON operations
        BEGIN SELECT RAISE(ABORT, 'operations rows are never deleted'); END
        """,
    ),
)

_GATEWAY = Migration(
    version=4,
    name="gateway_fencing",
    statements=(
        """
        CREATE TABLE gateway_workers (
            domain TEXT NOT NULL,
            worker TEXT NOT NULL,
            -- the fencing epoch; only a holder of the current one may begin or record
            epoch INTEGER NOT NULL CHECK (epoch > 0),
            updated_at_us INTEGER NOT NULL,
            PRIMARY KEY (domain, worker)
        ) STRICT, WITHOUT ROWID
        """,
        """
        CREATE TRIGGER gateway_workers_epoch_advances BEFORE UPDATE ON gateway_workers
        WHEN NEW.epoch <= OLD.epoch OR NEW.domain IS NOT OLD.domain OR NEW.worker IS NOT OLD.worker
        BEGIN SELECT RAISE(ABORT, 'gateway_workers: an epoch only advances'); END
        """,
        """
        CREATE TRIGGER gateway_workers_no_delete BEFORE DELETE ON gateway_workers
        BEGIN SELECT RAISE(ABORT, 'gateway_workers rows are never deleted'); END
        """,
        """
        CREATE TABLE gateway_dispatches (
            operation_id TEXT PRIMARY KEY REFERENCES operations (operation_id),
            worker TEXT NOT NULL,
            epoch INTEGER NOT NULL,
            job TEXT NOT NULL,
            dispatched_at_us INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID
        """,
        """
        CREATE TABLE operation_resolutions (
            operation_id TEXT PRIMARY KEY REFERENCES operations (operation_id),
            resolved_by TEXT NOT NULL,
            reason TEXT NOT NULL,
            resolved_at_us INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID
        """,
        *(
            f"""
            CREATE TRIGGER {table}_no_{verb} BEFORE {verb.upper()} ON {table}
            BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END
            """
            for table in ("gateway_dispatches", "operation_resolutions")
            for verb in ("update", "delete")
        ),
    ),
)

_RECOVERIES = Migration(
    version=5,
    name="operation_recoveries",
    statements=(
        """
        CREATE TABLE operation_recoveries (
            operation_id TEXT NOT NULL REFERENCES operations (operation_id),
            -- RESENT is claimed before the one resend; RECOVERED comes with the outcome
            step TEXT NOT NULL CHECK (step IN ('RECOVERED', 'RESENT')),
            recorded_at_us INTEGER NOT NULL,
            UNIQUE (operation_id, step)
        ) STRICT
        """,
        *_append_only("operation_recoveries"),
    ),
)

_THREAD_LIFECYCLE = Migration(
    version=6,
    name="thread_lifecycle",
    statements=(
        "ALTER TABLE agui_threads ADD COLUMN title TEXT",
        # The open cohort's latest deadline (NULL without one): the expiry sweeper's index.
        "ALTER TABLE agui_threads ADD COLUMN open_deadline_us INTEGER",
        """
        CREATE INDEX agui_threads_open_deadline ON agui_threads (open_deadline_us)
            WHERE open_deadline_us IS NOT NULL
        """,
        # The thread list: one owner's threads, newest first, keyset-paginated.
        """
        CREATE INDEX agui_threads_by_owner
            ON agui_threads (owner, updated_at_us DESC, thread_id DESC)
        """,
        # Retention: the threads idle the longest.
        "CREATE INDEX agui_threads_by_updated ON agui_threads (updated_at_us)",
        # The erasure ledger: ids only, no content. A log may only be deleted once its thread
        # is recorded here, and an erased id is never created again.
        """
        CREATE TABLE agui_thread_erasures (
            thread_id TEXT PRIMARY KEY,
            erased_at_us INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID
        """,
        *_append_only("agui_thread_erasures"),
        "DROP TRIGGER agui_thread_events_no_delete",
        """
        CREATE TRIGGER agui_thread_events_no_delete BEFORE DELETE ON agui_thread_events
        WHEN NOT EXISTS (SELECT 1 FROM agui_thread_erasures e WHERE e.thread_id = OLD.thread_id)
        BEGIN SELECT RAISE(ABORT, 'agui_thread_events is append-only (erase the thread)'); END
        """,
        """
        CREATE TRIGGER agui_threads_no_delete BEFORE DELETE ON agui_threads
        WHEN NOT EXISTS (SELECT 1 FROM agui_thread_erasures e WHERE e.thread_id = OLD.thread_id)
        BEGIN SELECT RAISE(ABORT, 'agui_threads rows go only through an erasure'); END
        """,
    ),
)

# Migration 9 (7 and 8 are taken on other lines of work). Configurations are retired, never
# deleted; deliveries are settled in place: the runtime needs no DELETE.
_A2A_PUSH = Migration(
    version=9,
    name="a2a_push",
    statements=(
        """
        CREATE TABLE a2a_push_configs (
            task_id TEXT NOT NULL,
            config_id TEXT NOT NULL,
            owner TEXT,
            config_json TEXT NOT NULL,
            created_at_us INTEGER NOT NULL,
            retired_at_us INTEGER,
            PRIMARY KEY (task_id, config_id)
        ) STRICT, WITHOUT ROWID
        """,
        # The outbox: one row per (state change, webhook). ``next_attempt_at_us`` is NULL once
        # settled (delivered or given up); a lease marks the replica sending it.
        """
        CREATE TABLE a2a_push_deliveries (
            delivery_id TEXT PRIMARY KEY,
            task_id TEXT NOT NULL,
            config_json TEXT NOT NULL,
            payload_json TEXT NOT NULL,
            created_at_us INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at_us INTEGER,
            lease_holder TEXT,
            lease_until_us INTEGER,
            delivered_at_us INTEGER,
            last_error TEXT
        ) STRICT
        """,
        """
        CREATE INDEX a2a_push_deliveries_due ON a2a_push_deliveries (next_attempt_at_us)
            WHERE next_attempt_at_us IS NOT NULL
        """,
    ),
)

_APPROVALS = Migration(
    version=8,
    name="approvals",
    statements=(
        # The thread an out-of-band decision continues, until its run is done: written by the
        # same statement as the decision, so a decision is never without its owed run.
        "ALTER TABLE continuation_streams ADD COLUMN owed_thread TEXT",
        """
        CREATE INDEX continuation_streams_owed ON continuation_streams (continuation_id)
            WHERE owed_thread IS NOT NULL
        """,
        # Who may decide a pause (principal ids and role:NAME), for the approvals inbox.
        """
        CREATE TABLE continuation_approvers (
            approver TEXT NOT NULL,
            continuation_id TEXT NOT NULL REFERENCES continuation_streams (continuation_id),
            PRIMARY KEY (approver, continuation_id)
        ) STRICT, WITHOUT ROWID
        """,
        *_append_only("continuation_approvers"),
    ),
)


# Migration 7 is PostgreSQL only (rate limits); SQLite and PostgreSQL share the numbering.
_THREAD_CHANGES = Migration(
    version=10,
    name="thread_changes",
    statements=(
        # A database-wide change clock: each thread append takes the next value and stamps the
        # thread with it, so one watcher per process finds which threads another process
        # appended to (``WHERE change_seq > last seen``) without one poll per live tail.
        """
        CREATE TABLE agui_change_clock (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            value INTEGER NOT NULL
        ) STRICT
        """,
        "INSERT INTO agui_change_clock VALUES (1, 0)",
        "ALTER TABLE agui_threads ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX agui_threads_by_change ON agui_threads (change_seq)",
    ),
)

# A process that tells a client OUTCOME_UNKNOWN declares it here first; a late reply is then
# refused (the fenced completion reads this row in its own transaction).
_OPERATION_UNKNOWNS = Migration(
    version=11,
    name="operation_unknowns",
    statements=(
        """
        CREATE TABLE operation_unknowns (
            operation_id TEXT PRIMARY KEY REFERENCES operations (operation_id),
            declared_by TEXT NOT NULL,
            reason TEXT NOT NULL,
            declared_at_us INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID
        """,
        *(
            f"""
            CREATE TRIGGER operation_unknowns_no_{verb} BEFORE {verb.upper()}
            ON operation_unknowns
            BEGIN SELECT RAISE(ABORT, 'operation_unknowns is append-only'); END
            """
            for verb in ("update", "delete")
        ),
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
        ALTER TABLE agui_threads ADD COLUMN title_source TEXT
            CHECK (title_source IN ('owner', 'agent', 'derived'))
        """,
    ),
)

# Migration 13: an erased thread's questions and answers leave the continuation log. The ledger
# (ids and times, no content) is what allows the one UPDATE a continuation event ever takes,
# its redaction (``SqliteEventStore.erase_correlated``); DELETE stays refused.
_CONTINUATION_ERASURE = Migration(
    version=13,
    name="continuation_erasure",
    statements=(
        """
        CREATE TABLE continuation_erasures (
            continuation_id TEXT PRIMARY KEY REFERENCES continuation_streams (continuation_id),
            erased_at_us INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID
        """,
        *_append_only("continuation_erasures"),
        # A thread's questions, found without a scan (created events only).
        """
        CREATE INDEX continuation_events_by_correlation
            ON continuation_events (json_extract(event_json, '$.correlationId'))
            WHERE version = 1
        """,
        "DROP TRIGGER continuation_events_no_update",
        """
        CREATE TRIGGER continuation_events_no_update BEFORE UPDATE ON continuation_events
        WHEN NOT EXISTS (
            SELECT 1 FROM continuation_erasures e WHERE e.continuation_id = OLD.continuation_id
        ) OR NEW.continuation_id IS NOT OLD.continuation_id OR NEW.version IS NOT OLD.version
        BEGIN SELECT RAISE(ABORT, 'continuation_events is append-only (erase the thread)'); END
        """,
    ),
)

# Numbered resends (issue 18): a resend that itself died before reaching the target may be
# followed by another after a fresh "never saw it" (``core/operations.next_resend``). SQLite
# cannot change a UNIQUE constraint in place, so the table is rebuilt (rows in their order);
# DROP TABLE runs no DELETE trigger, and the append-only triggers come back with it.
_RESEND_NUMBERS = Migration(
    version=14,
    name="operation_resend_numbers",
    statements=(
        """
        CREATE TABLE operation_recoveries_numbered (
            operation_id TEXT NOT NULL REFERENCES operations (operation_id),
            -- RESENT n is claimed before resend n; RECOVERED comes with the outcome
            step TEXT NOT NULL CHECK (step IN ('RECOVERED', 'RESENT')),
            recorded_at_us INTEGER NOT NULL,
            -- the resend's number (1, 2, ...); always 1 for RECOVERED
            number INTEGER NOT NULL DEFAULT 1 CHECK (number >= 1),
            UNIQUE (operation_id, step, number)
        ) STRICT
        """,
        """
        INSERT INTO operation_recoveries_numbered (operation_id, step, recorded_at_us)
        SELECT operation_id, step, recorded_at_us FROM operation_recoveries ORDER BY rowid
        """,
        "DROP TABLE operation_recoveries",
        "ALTER TABLE operation_recoveries_numbered RENAME TO operation_recoveries",
        *_append_only("operation_recoveries"),
    ),
)

# Migration 15 (issue 40): the size of a thread record's stored JSON (messages, state and the
# two cohort receipts), kept with the record: the run host bounds a thread by it
# (PAUSEMESH_MAX_THREAD_BYTES) and a read picks the large-read path by it. The index holds it
# beside the id, so that choice never reads the row: a column stored after a long thread's
# messages is only reached by walking the row's overflow pages (milliseconds for megabytes).
# Rows stored before it are measured once, here.
_STORED_BYTES = Migration(
    version=15,
    name="thread_stored_bytes",
    statements=(
        "ALTER TABLE agui_threads ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0",
        """
        UPDATE agui_threads SET stored_bytes = length(CAST(messages_json AS BLOB))
            + length(CAST(state_json AS BLOB))
            + coalesce(length(CAST(open_receipt_json AS BLOB)), 0)
            + coalesce(length(CAST(closed_receipt_json AS BLOB)), 0)
        """,
        "CREATE INDEX agui_threads_by_size ON agui_threads (thread_id, stored_bytes)",
    ),
)

# Migration 20 (numbers between are left to other lines of work). The push outbox becomes the
# one outbox: each row names its channel (``a2a``: A2A push notifications, every row before;
# ``webhook``: the event webhooks of ``core/webhooks.py``), and each channel's dispatcher
# claims its own rows on their own index.
_OUTBOX_CHANNELS = Migration(
    version=20,
    name="outbox_channels",
    statements=(
        "ALTER TABLE a2a_push_deliveries ADD COLUMN channel TEXT NOT NULL DEFAULT 'a2a'",
        "DROP INDEX a2a_push_deliveries_due",
        """
        CREATE INDEX outbox_due ON a2a_push_deliveries (channel, next_attempt_at_us)
            WHERE next_attempt_at_us IS NOT NULL
        """,
    ),
)

SQLITE_MIGRATIONS: tuple[Migration, ...] = (
    _CONTINUATIONS,
    _AGUI_THREADS,
    _OPERATIONS,
    _GATEWAY,
    _RECOVERIES,
    _THREAD_LIFECYCLE,
    _APPROVALS,
    _A2A_PUSH,
    _THREAD_CHANGES,
    _OPERATION_UNKNOWNS,
    _TITLE_SOURCE,
    _CONTINUATION_ERASURE,
    _RESEND_NUMBERS,
    _STORED_BYTES,
    _OUTBOX_CHANNELS,
    THREAD_MESSAGES,
    THREAD_QUEUE,
    MESSAGE_TIMES,
    REMOVED_MESSAGES,
    THREAD_STATE,
)
