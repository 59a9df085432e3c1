"""The database behind TestService/Db (docs/experiments.md, "Threaded vs async servers"):
`rows` inserts and SELECT COUNT(*) in one transaction, then a sleep that holds the pooled
connection. Postgres (psycopg 3; the sleep is pg_sleep, on the database side) or SQLite
(the sleep is in Python, connection held), each in a blocking form for the threaded model
and an asyncio form for the async one. The table is the Rust lab's."""

import asyncio
import logging
import os
import queue
import shutil
import sqlite3
import tempfile
import time

TABLE = "rpcmeter_rows"
CREATE_SQLITE = f"CREATE TABLE IF NOT EXISTS {TABLE} (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)"
CREATE_POSTGRES = f"CREATE TABLE IF NOT EXISTS {TABLE} (id BIGSERIAL PRIMARY KEY, payload TEXT NOT NULL)"
# Postgres can wait at most this long to connect at start-up.
CONNECT_TIMEOUT_S = 10


class DbError(Exception):
    """The database could not be opened: one line for the user."""


def _first_line(err):
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _check_postgres(url):
    """One connection first, so that a wrong URL is one clear line at once, not the pool's
    retries (whose warnings are silenced: the pool retries on its own while serving)."""
    import psycopg

    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    try:
        psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S).close()
    except Exception as err:
        raise DbError(f"cannot connect to {describe(url)}: {_first_line(err)}") from err


def describe(url):
    """The --db value without its password."""
    if url is None:
        return "a temporary SQLite file"
    scheme, sep, rest = url.partition("://")
    user_info, at, host = rest.rpartition("@")
    if sep and at and ":" in user_info:
        return f"{scheme}://{user_info.split(':', 1)[0]}:***@{host}"
    return url


class _Sqlite:
    """A pool of SQLite connections on a file (a fresh temporary one unless sqlite:PATH)."""

    def __init__(self, url, size):
        self._tmp = None
        if url is None:
            self._tmp = tempfile.mkdtemp(prefix="rpcmeter-lab-")
            path = os.path.join(self._tmp, "lab.sqlite3")
        else:
            path = url.removeprefix("sqlite:")
        try:
            # check_same_thread=False: a connection is handed from thread to thread, one at a time.
            self.connections = [sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False) for _ in range(size)]
            self.connections[0].execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
            self.connections[0].execute(CREATE_SQLITE)
        except sqlite3.Error as err:
            raise DbError(f"cannot open SQLite file {path}: {err}") from err

    @staticmethod
    def insert_count(conn, rows):
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(f"INSERT INTO {TABLE} (payload) VALUES (?)", (("row",) for _ in range(rows)))
            (count,) = conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return count

    def close(self):
        for conn in self.connections:
            conn.close()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)


class BlockingDb:
    """The threaded model's database: each call holds one pooled connection to its end."""

    def __init__(self, url, size, sleep_s):
        self._sleep_s = sleep_s
        self._postgres = url is not None and not url.startswith("sqlite:")
        if self._postgres:
            import psycopg_pool

            _check_postgres(url)
            self._pool = psycopg_pool.ConnectionPool(url, min_size=size, max_size=size, open=False)
            try:
                self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
                with self._pool.connection() as conn:
                    conn.execute(CREATE_POSTGRES)
            except Exception as err:
                self._pool.close()
                raise DbError(f"cannot connect to {describe(url)}: {_first_line(err)}") from err
        else:
            self._sqlite = _Sqlite(url, size)
            self._free = queue.Queue()
            for conn in self._sqlite.connections:
                self._free.put(conn)

    def insert_count_sleep(self, rows):
        if self._postgres:
            with self._pool.connection() as conn:
                with conn.transaction():
                    with conn.cursor() as cur:
                        cur.executemany(f"INSERT INTO {TABLE} (payload) VALUES (%s)", [("row",)] * rows)
                    (count,) = conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()
                conn.execute("SELECT pg_sleep(%s)", (self._sleep_s,))
                return count
        conn = self._free.get()
        try:
            count = _Sqlite.insert_count(conn, rows)
            time.sleep(self._sleep_s)  # holding the connection, as pg_sleep would
            return count
        finally:
            self._free.put(conn)

    def close(self):
        if self._postgres:
            self._pool.close()
        else:
            self._sqlite.close()


class AsyncDb:
    """The async model's database: the call yields to the event loop while it waits."""

    def __init__(self, url, size, sleep_s):
        self._url, self._size, self._sleep_s = url, size, sleep_s
        self._postgres = url is not None and not url.startswith("sqlite:")

    async def open(self):
        if self._postgres:
            import psycopg_pool

            _check_postgres(self._url)
            self._pool = psycopg_pool.AsyncConnectionPool(self._url, min_size=self._size, max_size=self._size, open=False)
            try:
                await self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
                async with self._pool.connection() as conn:
                    await conn.execute(CREATE_POSTGRES)
            except Exception as err:
                await self._pool.close()
                raise DbError(f"cannot connect to {describe(self._url)}: {_first_line(err)}") from err
        else:
            self._sqlite = _Sqlite(self._url, self._size)
            self._free = asyncio.Queue()
            for conn in self._sqlite.connections:
                self._free.put_nowait(conn)
        return self

    async def insert_count_sleep(self, rows):
        if self._postgres:
            async with self._pool.connection() as conn:
                async with conn.transaction():
                    async with conn.cursor() as cur:
                        await cur.executemany(f"INSERT INTO {TABLE} (payload) VALUES (%s)", [("row",)] * rows)
                    cur = await conn.execute(f"SELECT COUNT(*) FROM {TABLE}")
                    (count,) = await cur.fetchone()
                await conn.execute("SELECT pg_sleep(%s)", (self._sleep_s,))
                return count
        conn = await self._free.get()
        try:
            # sqlite3 has no asyncio form: the few inserts run on the loop (about a millisecond),
            # the sleep yields to it while holding the connection.
            count = _Sqlite.insert_count(conn, rows)
            await asyncio.sleep(self._sleep_s)
            return count
        finally:
            self._free.put_nowait(conn)

    async def close(self):
        if self._postgres:
            await self._pool.close()
        else:
            self._sqlite.close()
