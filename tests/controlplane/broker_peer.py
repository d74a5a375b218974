"""A producer or consumer process on the embedded broker, for tests that SIGKILL them.

``python -m tests.controlplane.broker_peer produce URL [COUNT]`` publishes messages of
random sizes (up to 128 KiB, so that a write takes a while) and prints each message's id
once ``publish`` has returned. ``... consume URL`` takes messages until the queue stays
empty for two seconds and prints ``ok <id>`` for each intact one, ``bad <id>`` for one
whose body does not match its checksum; a message that cannot be decoded at all ends the
process with a traceback. Lines are written with one ``write`` each, so a SIGKILL never
leaves half a line. Producers given ``PEER_START_AT`` (a Unix time) wait for it once their
imports are done, so that several open a fresh broker file at the same instant.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import time
import uuid

from kombu import Connection

QUEUE = "peer-test"
TRANSPORT = "controlplane.embedded_broker:Transport"


def _say(line: str) -> None:
    os.write(1, f"{line}\n".encode())


def produce(url: str, count: int) -> None:
    # Several producers given one start time open the broker together, imports done.
    start_at = float(os.environ.get("PEER_START_AT", "0"))
    time.sleep(max(0.0, start_at - time.time()))
    with Connection(url, transport=TRANSPORT) as conn:
        queue = conn.SimpleQueue(QUEUE)
        for _ in range(count):
            blob = random.randbytes(random.randint(1, 128 * 1024)).hex()
            message_id = uuid.uuid4().hex
            queue.put(
                {"id": message_id, "blob": blob, "sha": hashlib.sha256(blob.encode()).hexdigest()}
            )
            _say(message_id)


def consume(url: str) -> None:
    with Connection(url, transport=TRANSPORT) as conn:
        queue = conn.SimpleQueue(QUEUE)
        while True:
            try:
                message = queue.get(timeout=2)
            except queue.Empty:
                return
            body = message.payload
            intact = hashlib.sha256(body["blob"].encode()).hexdigest() == body["sha"]
            _say(f"{'ok' if intact else 'bad'} {body['id']}")
            message.ack()


if __name__ == "__main__":
    role, url = sys.argv[1], sys.argv[2]
    if role == "produce":
        produce(url, int(sys.argv[3]) if len(sys.argv) > 3 else 10**9)
    else:
        consume(url)
