"""The PostgreSQL store's tables, their migrations, and the one place that runs them.

Every table is prefixed ``tether_``, so a database shared with an application keeps them apart;
put them in a schema of their own with ``options=-csearch_path=NAME`` in the URL. Several
processes may open a new database at the same moment (two workers starting): each migration
runs under a transaction-scoped advisory lock and reads the version again inside it, so whoever
comes second finds the step done.
"""

from __future__ import annotations

from psycopg import AsyncConnection

from tether.errors import ErrorCode, StoreError

__all__ = ("MIGRATIONS", "SCHEMA_VERSION", "migrate")

#: Each entry migrates the schema from version ``index`` to ``index + 1``.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE tether_sessions (
        id text PRIMARY KEY,
        created_at double precision NOT NULL,
        label text,
        agent text,
        parent_session text,
        origin text NOT NULL,
        delegation_depth integer NOT NULL,
        seed_length integer NOT NULL,
        model text
    );
    CREATE INDEX tether_sessions_by_parent ON tether_sessions (parent_session);
    CREATE INDEX tether_sessions_by_age ON tether_sessions (created_at DESC, id);
    CREATE TABLE tether_events (
        session_id text NOT NULL REFERENCES tether_sessions (id),
        seq integer NOT NULL,
        type text NOT NULL,
        data text NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE tether_leases (
        session_id text PRIMARY KEY REFERENCES tether_sessions (id),
        host text NOT NULL,
        pid integer NOT NULL,
        started double precision,
        token text NOT NULL,
        expires_at double precision NOT NULL
    );
    CREATE TABLE tether_mailbox (
        id bigserial PRIMARY KEY,
        session_id text NOT NULL REFERENCES tether_sessions (id),
        message_id text NOT NULL,
        data text NOT NULL
    );
    CREATE INDEX tether_mailbox_by_session ON tether_mailbox (session_id, id);
    """,
    # 2: the budget ledger (tether.contracts.BudgetLedger): each budget holder's settled spend
    # (Spend JSON, NULL while unknown) and the claims of the owners spending under it.
    """
    CREATE TABLE tether_budget_ledger (
        holder text PRIMARY KEY,
        spent text,
        known boolean NOT NULL DEFAULT false
    );
    CREATE TABLE tether_budget_claims (
        holder text NOT NULL,
        token text NOT NULL,
        host text NOT NULL,
        pid integer NOT NULL,
        started double precision,
        expires_at double precision NOT NULL,
        exclusive boolean NOT NULL,
        reserved text NOT NULL,
        PRIMARY KEY (holder, token)
    );
    CREATE INDEX tether_budget_claims_by_token ON tether_budget_claims (token);
    """,
    # 3: who created a session (its caller, Caller JSON; NULL: nobody known, or written before
    # callers were recorded), whether it outlives its parent, and when it was closed (NULL:
    # open). Older rows read as open, attached sessions without a caller.
    """
    ALTER TABLE tether_sessions ADD COLUMN caller text;
    ALTER TABLE tether_sessions ADD COLUMN detached boolean NOT NULL DEFAULT false;
    ALTER TABLE tether_sessions ADD COLUMN closed_at double precision;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)

#: The advisory lock every migrating process takes (any fixed 64-bit number: "tether" in ASCII).
_MIGRATION_LOCK = 0x746574686572


async def migrate(db: AsyncConnection[tuple[object, ...]], where: str) -> None:
    """Bring the database ``db`` is connected to up to :data:`SCHEMA_VERSION`, one step per
    transaction; refuse a newer schema (``STORE_SCHEMA_UNSUPPORTED``)."""
    while True:
        async with db.transaction():
            await db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            await db.execute("CREATE TABLE IF NOT EXISTS tether_schema (version integer NOT NULL)")
            row = await (await db.execute("SELECT version FROM tether_schema")).fetchone()
            version = 0 if row is None else int(str(row[0]))
            if version > SCHEMA_VERSION:
                raise StoreError(
                    ErrorCode.STORE_SCHEMA_UNSUPPORTED,
                    f"session store schema version {version} is newer than this "
                    f"tether-postgres understands ({SCHEMA_VERSION})",
                    file=where,
                    remedy="upgrade tether-postgres, or point the profile's store at another "
                    "database or schema",
                )
            if version == SCHEMA_VERSION:
                return
            for statement in MIGRATIONS[version].split(";"):
                if statement.strip():
                    await db.execute(statement.encode())
            if row is None:
                await db.execute("INSERT INTO tether_schema VALUES (%s)", (version + 1,))
            else:
                await db.execute("UPDATE tether_schema SET version = %s", (version + 1,))
