"""The statements a PostgreSQL migration writes for a thread's table that only erasure empties.

Each such table (messages, removed ids, state) gets the same pair of triggers: a row is deleted
only once its thread is erased, and the table is never truncated. Adding one also redefines
``pausemesh_erase_thread`` to delete its rows before the thread's record. These build those
statements from the table names; the text is what the migrations held (their checksums cover
it), so a migration written with them is the migration that was applied.
"""

from __future__ import annotations

__all__ = ("erase_only_triggers", "erase_thread_function")

_ERASE_HEAD = """
        CREATE OR REPLACE FUNCTION {schema}.pausemesh_erase_thread(
            p_thread_id TEXT, p_at TIMESTAMPTZ
        )
        RETURNS BOOLEAN
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        DECLARE
            erased INTEGER;
        BEGIN
            INSERT INTO {schema}.agui_thread_erasures (thread_id, erased_at)
                VALUES (p_thread_id, p_at) ON CONFLICT DO NOTHING;
"""
_ERASE_TAIL = """            GET DIAGNOSTICS erased = ROW_COUNT;
            RETURN erased = 1;
        END
        $$
        """


def erase_only_triggers(table: str) -> tuple[str, str]:
    """``table``'s rows go only with their thread's erasure; no ``TRUNCATE``."""
    return (
        f"""
        CREATE TRIGGER pausemesh_{table}_erase_only
            BEFORE DELETE ON {{schema}}.{table}
            FOR EACH ROW EXECUTE FUNCTION {{schema}}.pausemesh_reject_unerased_delete()
        """,
        f"""
        CREATE TRIGGER pausemesh_{table}_no_truncate
            BEFORE TRUNCATE ON {{schema}}.{table}
            FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.pausemesh_reject_mutation()
        """,
    )


def erase_thread_function(*tables: str) -> str:
    """``pausemesh_erase_thread`` deleting the thread's rows of ``tables``, in that order, then
    its record (whose row count says whether there was a thread)."""
    # The table names are the migrations' constants, never input.
    deletes = "".join(
        f"            DELETE FROM {{schema}}.{table} WHERE thread_id = p_thread_id;\n"  # noqa: S608
        for table in (*tables, "agui_threads")
    )
    return _ERASE_HEAD + deletes + _ERASE_TAIL
