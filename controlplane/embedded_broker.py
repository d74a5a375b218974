"""The embedded Celery broker of ``make run``: Kombu's SQLAlchemy transport on an SQLite file.

Selected by ``CELERY_BROKER_URL=sqlite:///<path>`` (the default). A message is one row,
written and taken in SQLite transactions, so no reader sees half a message. Unlike the
stock transport: SQLite runs in WAL mode with a busy timeout (the web server, worker and
beat share the file); taking a message deletes its row in one ``BEGIN IMMEDIATE``
transaction, so polls do not slow as delivered rows pile up; a queue declared twice is
not an error and a publish is one plain INSERT. A SIGKILLed worker loses the message it
held: a nudge lost, not work (the sweeper re-sends stalled rows). Production uses Redis.
"""

from __future__ import annotations

import time
from json import dumps, loads
from queue import Empty
from typing import Any

from kombu.transport import sqlalchemy as kombu_sqla
from kombu.transport.sqlalchemy.models import metadata
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

# Seconds a process waits for another one's write lock before the operation fails.
BUSY_TIMEOUT_SECONDS = 30


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_SECONDS})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        # WAL lets pollers read while a producer writes; NORMAL syncs at checkpoints,
        # which survives a killed process (the failure that matters here).
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    # The web server, the worker and beat start together on a fresh file: whoever loses
    # the race to create the tables sees "table already exists" and simply retries.
    for attempt in range(5):
        try:
            metadata.create_all(engine)
            break
        except OperationalError:
            if attempt == 4:
                raise
            time.sleep(0.2)
    return engine


class Channel(kombu_sqla.Channel):
    """Kombu's SQLAlchemy channel, tuned for one SQLite file shared by several processes."""

    _engines: dict[str, Any] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._queue_ids: dict[str, int] = {}

    def _engine_from_config(self) -> Engine:
        # The stock channel hands every transport option to create_engine, which rejects
        # the ones Kombu itself reads (polling_interval); only the URL matters here.
        client = self.connection.client
        assert client is not None, "a channel belongs to a connection"
        return _sqlite_engine(str(client.hostname))

    def _queue_id(self, queue: str) -> int:
        """The queue's row id, created on first use. ``INSERT OR IGNORE`` makes two
        processes declaring a queue at once harmless; queues are never deleted, so the id
        is read once per channel instead of once per message."""
        if queue not in self._queue_ids:
            table = self.queue_cls.__tablename__
            session = self.session
            session.execute(
                text(f"INSERT OR IGNORE INTO {table} (name) VALUES (:name)"), {"name": queue}
            )
            session.commit()
            ident: int = session.execute(
                text(f"SELECT id FROM {table} WHERE name = :name"), {"name": queue}
            ).scalar_one()
            session.commit()
            self._queue_ids[queue] = ident
        return self._queue_ids[queue]

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        self._queue_id(queue)

    # The stubs of Kombu's base and SQLAlchemy channels disagree on this signature.
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        # One INSERT in its own transaction: the message exists whole or not at all. A
        # plain statement: the ORM's unit of work cost several times more per message.
        session = self.session
        try:
            session.execute(
                self.message_cls.__table__.insert().values(
                    queue_id=self._queue_id(queue), payload=dumps(payload), visible=True
                )
            )
            session.commit()
        except OperationalError:
            session.rollback()
            raise

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        queue_id = self._queue_id(queue)
        table = self.message_cls.__tablename__
        session = self.session
        waiting = session.execute(
            text(f"SELECT 1 FROM {table} WHERE queue_id = :queue LIMIT 1"), {"queue": queue_id}
        ).first()
        session.commit()
        if waiting is None:
            raise Empty()
        # Take the oldest message under the write lock: two consumers never get the same
        # row, and the row is gone the moment its transaction commits.
        session.execute(text("BEGIN IMMEDIATE"))
        try:
            row = session.execute(
                text(
                    f"DELETE FROM {table} WHERE id = (SELECT id FROM {table} "
                    "WHERE queue_id = :queue ORDER BY id LIMIT 1) RETURNING payload"
                ),
                {"queue": queue_id},
            ).first()
        finally:
            session.commit()
        if row is None:
            raise Empty()
        return dict(loads(row.payload))


class Transport(kombu_sqla.Transport):
    """The ``sqlite://`` transport: Kombu's SQLAlchemy transport with :class:`Channel`."""

    Channel = Channel
