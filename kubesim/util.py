"""Small helpers shared by the simulator's modules: time stamps, names, IP addresses."""

from __future__ import annotations

import datetime
import functools
import math
import os
import random
import string
import time
from typing import Any

_ALNUM = string.ascii_lowercase + string.digits
# Kubernetes avoids vowels and look-alike characters in generated suffixes.
_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"


# The last second ``now`` (and ``stamp``) formatted, and its text: a write stamps several
# fields and events within one second, and strftime is a large share of a small write.
_now_cache: tuple[int, str] = (-1, "")
_stamp_cache: tuple[int, str] = (-(1 << 62), "")
# uids come from a private generator seeded from the OS: they need to be unique, not
# unguessable, and one system call per object (pods and their events) is measurable.
_uid_rng = random.Random(os.urandom(32))
_UID_MASK = ~((0xC000 << 48) | (0xF000 << 64)) & ((1 << 128) - 1)
_UID_BITS = (0x8000 << 48) | (4 << 76)


def now() -> str:
    """Current time as RFC 3339 in UTC, second precision (as metav1.Time prints)."""
    global _now_cache
    second = int(time.time())
    cached = _now_cache
    if cached[0] == second:
        return cached[1]
    text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
    _now_cache = (second, text)
    return text


def new_uid() -> str:
    """A random version-4 UUID, as the API server gives each object."""
    # The version (4) and variant (10) bits set as uuid.UUID(version=4) sets them.
    n = (_uid_rng.getrandbits(128) & _UID_MASK) | _UID_BITS
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def random_hex(digits: int) -> str:
    """``digits`` random lowercase hex digits (event name suffixes)."""
    return f"{_uid_rng.getrandbits(4 * digits):0{digits}x}"


def stamp(seconds: float) -> str:
    """``seconds`` since the epoch as RFC 3339 in UTC, second precision: for time stamps
    that must agree with the simulator's clock (a ``ManualClock`` in tests)."""
    global _stamp_cache
    second = math.floor(seconds)
    cached = _stamp_cache
    if cached[0] == second:
        return cached[1]
    text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
    _stamp_cache = (second, text)
    return text


def stamp_nano(seconds: float) -> str:
    """``seconds`` as RFC 3339 with nanoseconds, as the kubelet prefixes log lines."""
    when = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f") + f"{int(seconds * 1e9) % 1000:03d}Z"


def now_micro() -> str:
    """Current time with microseconds (metav1.MicroTime, used by eventTime)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# Cached: a Table of 20,000 pods parses as many time stamps, most of them equal (second
# precision), and strptime cost more than the rest of the Table.
@functools.lru_cache(maxsize=4096)
def parse_time(text: str) -> datetime.datetime:
    """Parse an RFC 3339 time stamp written by :func:`now`."""
    return datetime.datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.UTC)


def suffix(n: int = 5, rng: random.Random | None = None) -> str:
    """A random name suffix like the ones generateName produces."""
    r = rng or random
    return "".join(r.choice(_SUFFIX_CHARS) for _ in range(n))


def ip_from_index(prefix: str, index: int) -> str:
    """``10.244`` + 1 -> ``10.244.0.1``; walks the last two octets."""
    index += 1
    return f"{prefix}.{(index // 254) % 256}.{index % 254 + 1}"


def get_path(obj: Any, *keys: str, default: Any = None) -> Any:
    """Nested ``dict.get`` that tolerates missing levels."""
    cur = obj
    for k in keys:
        if not isinstance(cur, dict):
            return default
        cur = cur.get(k)
        if cur is None:
            return default
    return cur


def owner_ref(obj: dict[str, Any], controller: bool = True) -> dict[str, Any]:
    """An ownerReference pointing at ``obj``."""
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }
