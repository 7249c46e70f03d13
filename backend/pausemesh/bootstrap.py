"""The composition root: settings → storage → ContinuationService (→ the web app).

Everything else takes its collaborators as parameters; only this module picks adapters. Each
store backend assembles its own ``Storage`` from plain values (``stores/sqlite/storage.py``,
``stores/postgres/storage.py``); here the settings choose one and pass it those values.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from pausemesh.agui.conversations import Conversations, PurgeReport
from pausemesh.agui.run.expiry import close_lapsed_cohorts
from pausemesh.core.clock import SystemClock
from pausemesh.core.drain import Drain
from pausemesh.core.errors import SettingsError, StoreError
from pausemesh.core.instance import ProcessInstance
from pausemesh.core.leases import LeaseKeeper
from pausemesh.core.limits import LocalRateLimiter, RateLimiter, StreamSlots
from pausemesh.core.links import DecisionLinks
from pausemesh.core.ports import Clock, JobLock, Observer
from pausemesh.core.service import ContinuationService
from pausemesh.core.stats import StatsReader
from pausemesh.core.tokens import KeyedTokenIssuer, RandomTokenIssuer
from pausemesh.core.webhooks import WebhookRoutes, parse_webhooks
from pausemesh.observability.observer import LoggingObserver
from pausemesh.outbox.dispatcher import OutboxDispatcher, OutboxOptions
from pausemesh.outbox.url_policy import PushUrlPolicy
from pausemesh.outbox.webhook_sender import webhook_dispatcher
from pausemesh.server_key import SecretKey, resolve_key_ring, resolve_secret_key
from pausemesh.settings import Settings
from pausemesh.stores.sqlite.storage import open_sqlite_read_only, open_sqlite_storage
from pausemesh.stores.storage import Storage

__all__ = (
    "Runtime",
    "build_service",
    "decision_links",
    "free_predecessor_leases",
    "load_webhooks",
    "open_read_only_storage",
    "open_runtime",
    "open_storage",
    "purge_threads",
    "run_expiry_sweeper",
    "run_retention",
    "webhook_delivery",
)

_log = logging.getLogger("pausemesh.bootstrap")

# How many due continuations one sweep expires before yielding to the loop again.
_SWEEP_BATCH = 100


async def open_read_only_storage(settings: Settings) -> tuple[Storage, StatsReader]:
    """The stores ``settings`` selects, for reading only (``pausemesh inspect``/``stats``):
    never migrated; a missing or unmigrated database is a ``StoreError`` (MIGRATION_*)."""
    if settings.uses_postgres:
        assert settings.database_url is not None  # noqa: S101 - uses_postgres says so
        # Imported here so a SQLite-only process never loads asyncpg.
        from pausemesh.stores.postgres.storage import open_postgres_read_only  # noqa: PLC0415

        return await open_postgres_read_only(settings.database_url, schema=settings.database_schema)
    return await open_sqlite_read_only(settings.database_path)


async def open_storage(settings: Settings) -> Storage:
    """Open (and migrate, for SQLite) the stores that ``settings`` selects."""
    if settings.uses_postgres:
        assert settings.database_url is not None  # noqa: S101 - uses_postgres says so
        # Imported here so a SQLite-only process never loads asyncpg.
        from pausemesh.stores.postgres.storage import open_postgres_storage  # noqa: PLC0415

        return await open_postgres_storage(settings.database_url, schema=settings.database_schema)
    return await open_sqlite_storage(settings.database_path, sync=settings.sqlite_sync)


def load_webhooks(settings: Settings) -> WebhookRoutes | None:
    """The subscriptions of ``PAUSEMESH_WEBHOOKS_FILE`` (None when unset); a file that cannot
    be read or is not valid is a ``SettingsError`` naming it."""
    if settings.webhooks_file is None:
        return None
    try:
        document = Path(settings.webhooks_file).read_bytes()
        return WebhookRoutes(parse_webhooks(document))
    except (OSError, ValueError) as error:
        msg = f"PAUSEMESH_WEBHOOKS_FILE: {error}"
        raise SettingsError(msg, code="INVALID_SETTINGS") from None


def build_service(
    settings: Settings,
    storage: Storage,
    *,
    key: SecretKey | None = None,
    clock: Clock | None = None,
    observer: Observer | None = None,
) -> ContinuationService:
    key, previous = resolve_key_ring(settings, key)
    ring = {old.key_id: old.key for old in previous}
    ring[key.key_id] = key.key
    return ContinuationService(
        store=storage.events,
        clock=clock or SystemClock(),
        token_issuer=RandomTokenIssuer(),
        keyed_issuer=KeyedTokenIssuer(ring, key.key_id),
        observer=observer or LoggingObserver(),
        token_ttl_seconds=settings.token_ttl_seconds,
        max_pause_ttl_seconds=settings.max_pause_ttl_seconds,
        webhooks=load_webhooks(settings),
    )


def decision_links(settings: Settings, key: SecretKey) -> DecisionLinks | None:
    """The decision links under the server key (None unless ``PAUSEMESH_DECISION_LINKS``)."""
    if not settings.decision_links:
        return None
    base = settings.public_url or f"http://{settings.host}:{settings.port}"
    return DecisionLinks(key.key, base)


def webhook_delivery(runtime: Runtime) -> OutboxDispatcher | None:
    """The webhook channel's dispatcher for this process (None without webhooks or a push
    store); every replica runs one, the outbox claim gives each delivery to one of them."""
    routes = runtime.service.webhooks
    push = runtime.storage.push
    if routes is None or push is None:
        return None
    settings = runtime.settings
    options = OutboxOptions(
        max_attempts=settings.a2a_push_max_attempts,
        backoff_seconds=settings.a2a_push_backoff_seconds,
        backoff_max_seconds=settings.a2a_push_backoff_max_seconds,
        lease_seconds=settings.a2a_push_lease_seconds,
        timeout_seconds=settings.a2a_push_timeout_seconds,
        poll_seconds=settings.a2a_push_poll_seconds,
    )
    policy = PushUrlPolicy(settings.a2a_push_allow, what="The webhook URL")
    return webhook_dispatcher(
        lambda: push,
        routes,
        policy,
        events=runtime.storage.events,
        holder=runtime.instance.holder,
        options=options,
        clock=runtime.service.clock,
        links=None if runtime.links is None else runtime.links.for_body,
    )


async def free_predecessor_leases(storage: Storage, instance: ProcessInstance) -> None:
    """A restarted replica frees the run leases its dead predecessor held (same instance name),
    so those threads are answerable now rather than after the lease TTL."""
    if storage.threads is None:
        return
    try:
        freed = await storage.threads.release_instance_leases(instance.name, keep=instance.holder)
    except StoreError as error:
        # A store that is down at start must not stop the start: readiness reports it, and the
        # predecessor's leases still lapse after their TTL.
        _log.warning("could not free the previous process's run leases: %s", error.code)
        return
    if freed:
        _log.info("freed %d run leases of this replica's previous process", freed)


async def _may_run(jobs: JobLock | None) -> bool:
    """Whether this process runs the next background pass (it holds the job lock)."""
    if jobs is None:
        return True
    try:
        return await jobs.try_hold()
    except Exception:  # noqa: BLE001 - a lock that fails means "not now"; asked again next pass
        _log.warning("job lock check failed; skipping this pass")
        return False


async def run_expiry_sweeper(
    service: ContinuationService,
    interval_seconds: float,
    leases: LeaseKeeper | None = None,
    *,
    jobs: JobLock | None = None,
) -> None:
    """Materialize expiry in the background so watchers see it without a read;
    with the process's lease keeper (over the thread store), also close the thread cohorts
    whose questions have all lapsed (their logs say so, live tails see it), each under an
    instance lease of that keeper. With ``jobs``, only the process holding it sweeps."""
    while True:
        expired = 0
        try:
            if await _may_run(jobs):
                expired = await service.expire_due(limit=_SWEEP_BATCH)
                if leases is not None:
                    await close_lapsed_cohorts(leases, service)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a failed sweep is retried; it must not kill the app
            _log.warning("expiry sweep failed; retrying in %.1fs", interval_seconds)
            expired = 0
        if expired < _SWEEP_BATCH:
            await asyncio.sleep(interval_seconds)


async def purge_threads(
    settings: Settings,
    *,
    older_than: timedelta,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
) -> PurgeReport:
    """``pausemesh purge``: erase (or list) the threads idle longer than ``older_than``.

    Cancelling a pending question needs no token, so this runs without the server key.
    """
    storage = await open_storage(settings)
    try:
        if storage.threads is None:
            msg = "this storage has no thread store"
            raise SettingsError(msg, code="INVALID_SETTINGS")
        service = ContinuationService(
            store=storage.events,
            clock=SystemClock(),
            token_ttl_seconds=settings.token_ttl_seconds,
            max_pause_ttl_seconds=settings.max_pause_ttl_seconds,
        )
        conversations = Conversations(threads=storage.threads, service=service)
        return await conversations.purge(older_than=older_than, dry_run=dry_run, progress=progress)
    finally:
        await storage.close()


async def run_retention(
    conversations: Conversations,
    older_than: timedelta,
    interval_seconds: float,
    *,
    jobs: JobLock | None = None,
) -> None:
    """Erase threads idle longer than ``older_than``, every ``interval_seconds`` (retention);
    with ``jobs``, only the process holding it purges."""
    while True:
        try:
            if await _may_run(jobs):
                await conversations.purge(older_than=older_than)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a failed purge is retried; it must not kill the app
            _log.warning("retention purge failed; retrying in %.0fs", interval_seconds)
        await asyncio.sleep(interval_seconds)


@dataclass(slots=True)
class Runtime:
    """What a running PauseMesh holds: settings, storage, the service and its server key."""

    settings: Settings
    storage: Storage
    service: ContinuationService
    key: SecretKey
    # Who holds this process's run leases (pausemesh.core.instance).
    instance: ProcessInstance = field(default_factory=lambda: ProcessInstance.start(None))
    # Renews every lease this instance holds (runs, expiry closes, A2A follow-ups); None
    # without a thread store.
    leases: LeaseKeeper | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    # PAUSEMESH_RATE_LIMIT's counters (None: no rate limit): the store's when it has shared
    # ones (PostgreSQL), else this process's.
    rate_limiter: RateLimiter | None = None
    # Open SSE streams per principal, in this process: runs (and other streams that end by
    # themselves) and idle tails, counted apart so tails never block a run.
    streams: StreamSlots = field(default_factory=lambda: StreamSlots(32))
    tails: StreamSlots = field(default_factory=lambda: StreamSlots(32, what="tails"))
    # Set on SIGTERM: runs and tails wind down (pausemesh.core.drain).
    drain: Drain = field(default_factory=Drain)
    # The one-click decision links (PAUSEMESH_DECISION_LINKS), None when off.
    links: DecisionLinks | None = None


@asynccontextmanager
async def open_runtime(
    settings: Settings,
    *,
    storage: Storage | None = None,
    clock: Clock | None = None,
    observer: Observer | None = None,
    sweeper: bool = True,
) -> AsyncIterator[Runtime]:
    """Open storage (unless the host passes its own), build the service, run the sweeper.

    Storage passed in stays the host's: it is not closed here.
    """
    key = resolve_secret_key(settings)
    owned = storage is None
    storage = storage or await open_storage(settings)
    try:
        service = build_service(settings, storage, key=key, clock=clock, observer=observer)
        instance = ProcessInstance.start(settings.instance_name)
        rate_limiter = None
        if settings.rate_limit is not None:
            rate_limiter = storage.rate_limiter or LocalRateLimiter()
        leases = None
        if storage.threads is not None:
            leases = LeaseKeeper(
                storage.threads,
                clock=service.clock,
                ttl=timedelta(seconds=settings.lease_seconds),
                holder=instance.holder,
            )
        runtime = Runtime(
            settings=settings,
            storage=storage,
            service=service,
            key=key,
            instance=instance,
            leases=leases,
            rate_limiter=rate_limiter,
            streams=StreamSlots(settings.max_streams_per_principal),
            tails=StreamSlots(settings.max_tails_per_principal, what="tails"),
            links=decision_links(settings, key),
        )
        await free_predecessor_leases(storage, instance)
        webhooks = webhook_delivery(runtime)
        if webhooks is not None:
            runtime.tasks.append(asyncio.create_task(webhooks.run(), name="pausemesh-webhooks"))
        if sweeper:
            runtime.tasks.append(
                asyncio.create_task(
                    run_expiry_sweeper(
                        service,
                        settings.sweep_interval_seconds,
                        leases,
                        jobs=storage.jobs,
                    ),
                    name="pausemesh-expiry-sweeper",
                )
            )
            if settings.retention_days is not None and storage.threads is not None:
                conversations = Conversations(threads=storage.threads, service=service)
                runtime.tasks.append(
                    asyncio.create_task(
                        run_retention(
                            conversations,
                            timedelta(days=settings.retention_days),
                            settings.retention_interval_seconds,
                            jobs=storage.jobs,
                        ),
                        name="pausemesh-retention",
                    )
                )
        try:
            yield runtime
        finally:
            for task in runtime.tasks:
                task.cancel()
            for task in runtime.tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    finally:
        if owned:
            await storage.close()
