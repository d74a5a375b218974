"""Fault injection: a fraction of API requests answered with an error or delayed.

Each request (admin paths excepted) is faulted with probability ``rate``: it waits
``delay_ms`` and is answered with one of ``codes`` and a realistic ``Status`` body (no
codes: only delayed). Besides HTTP statuses, :data:`DROPPED`, :data:`RESET` and
:data:`SLOW` are faults of the connection, as behind a load balancer; 410 goes only to
watches, as an ``ERROR`` event. :meth:`Faults.set` says what else may be set. Every
request is kept in :attr:`Faults.history` as a :class:`Seen`, so a test can tell
whether a client waited the ``Retry-After`` it was told.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from kubesim.errors import ApiError

DROPPED = 0  # the connection closed without an answer
RESET = -1  # half the answer sent, then the connection reset
SLOW = -2  # served, but only after ``slow_ms``
# The verbs a fault lands on, as the API server's audit log names them (plus the two
# subresources a client streams: a pod's log and the service proxy).
VERBS = ("list", "get", "watch", "create", "apply", "patch", "update", "delete", "log", "proxy")

_REASONS = {
    500: ("InternalError", "Internal error occurred: kubesim injected an internal error"),
    502: ("InternalError", "Internal error occurred: bad gateway (kubesim)"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: (
        "Timeout",
        (
            "the server was unable to return a response in the time allotted, but "
            "may still be processing the request"
        ),
    ),
    429: (
        "TooManyRequests",
        ("the server has received too many requests and has asked us to try again later"),
    ),
    408: ("Timeout", "request timed out"),
}


@dataclass(slots=True)
class Seen:
    """One request as the fault injector saw it."""

    at: float  # time.monotonic() when it came
    method: str
    path: str
    code: int | None  # the injected code (0: dropped), None when served normally
    client: str = ""  # its User-Agent: which process sent it
    answered: float | None = None  # when an injected error was answered (or dropped)
    verb: str = ""  # one of VERBS


def verb_of(method: str, path: str, params: dict[str, str], media_type: str) -> str:
    """The verb of a request (one of :data:`VERBS`) from its method, path, query and body
    type: a GET of a collection is a list, of one object a get; a PATCH is an apply when
    its body is an apply patch."""
    parts = [p for p in path.split("/") if p]
    if "proxy" in parts:
        return "proxy"
    if method == "GET":
        # /api/v1/<rest> or /apis/<group>/<version>/<rest>: a rest of odd length (plural,
        # or namespaces/<ns>/plural) is a collection; a rest under watch/ the legacy watch.
        rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
        if params.get("watch") in ("true", "1") or rest[:1] == ["watch"]:
            return "watch"
        if parts and parts[-1] == "log":
            return "log"
        return "list" if len(rest) % 2 else "get"
    if method == "PATCH":
        return "apply" if media_type == "application/apply-patch+yaml" else "patch"
    return {"POST": "create", "PUT": "update", "DELETE": "delete"}.get(method, method.lower())


def kind_name(code: int | None) -> str:
    """A fault kind's name in the statistics: its status, or what befell the connection."""
    if code is None or code == SLOW:
        return "delay"
    if code == RESET:
        return "reset"
    return str(code)


@dataclass
class FaultConfig:
    """What to inject."""

    rate: float = 0.0
    codes: tuple[int, ...] = (500, 503, 429, 409)
    delay_ms: int = 0
    retry_after: int = 1
    methods: tuple[str, ...] | None = None
    seed: int | None = None
    max_page: int = 0
    slow_ms: int = 0
    verb_rates: dict[str, float] = field(default_factory=dict)  # a verb's own rate
    rotate: bool = False  # each verb's faults take the codes in turn, not at random
    floor: int = 0  # each verb's first requests after set() faulted whatever the rate
    spare: tuple[str, ...] = ()  # User-Agents never faulted (a test's own client)


@dataclass
class Faults:
    """Thread-safe fault picker with per-code statistics."""

    config: FaultConfig = field(default_factory=FaultConfig)
    requests: Counter[str] = field(default_factory=Counter)
    bodies: Counter[str] = field(default_factory=Counter)
    injected: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    rng: random.Random = field(default_factory=random.Random)
    history: deque[Seen] = field(default_factory=lambda: deque(maxlen=100_000))
    turns: Counter[str] = field(default_factory=Counter)  # faults per verb, for ``rotate``
    since: Counter[str] = field(default_factory=Counter)  # requests per verb since set()

    def set(
        self,
        rate: float = 0.2,
        codes: Any = (500, 503, 429, 409),
        delay_ms: int = 0,
        retry_after: int = 1,
        methods: Any = None,
        seed: int | None = None,
        max_page: int = 0,
        slow_ms: int = 0,
        verb_rates: dict[str, float] | None = None,
        rotate: bool = False,
        floor: int = 0,
        spare: Any = (),
    ) -> None:
        """Turn injection on (replacing any previous setting). :data:`DROPPED` closes the
        connection unanswered; :data:`RESET` sends half an answer (the request was carried
        out) then resets; :data:`SLOW` serves after ``slow_ms``. ``max_page`` caps a
        list's page whatever its ``limit``, so clients must follow ``continue``;
        ``verb_rates`` gives a verb (:data:`VERBS`) a rate of its own, so a rare one is
        faulted as often as needed; ``rotate`` makes each verb's faults take the codes in
        turn, so every code lands on every verb; ``floor`` faults each verb's first
        requests whatever the rate; ``spare`` names clients (``User-Agent``) never
        faulted, a test's own reads."""
        rates = {str(v): float(r) for v, r in (verb_rates or {}).items()}
        if not all(0.0 <= r <= 1.0 for r in [float(rate), *rates.values()]):
            raise ValueError("rate must be between 0 and 1")
        with self.lock:
            self.config = FaultConfig(
                rate=float(rate),
                codes=tuple(int(c) for c in (codes or ())),
                delay_ms=int(delay_ms or 0),
                retry_after=int(retry_after),
                methods=tuple(m.upper() for m in methods) if methods else None,
                seed=seed,
                max_page=int(max_page or 0),
                slow_ms=int(slow_ms or 0),
                verb_rates=rates,
                rotate=bool(rotate),
                floor=int(floor or 0),
                spare=tuple(str(a) for a in (spare or ())),
            )
            self.since.clear()
            if seed is not None:
                self.rng.seed(seed)

    def clear(self) -> None:
        """Turn injection off."""
        with self.lock:
            self.config = FaultConfig()

    def reset_stats(self) -> None:
        """Zero the counters."""
        with self.lock:
            self.requests.clear()
            self.bodies.clear()
            self.injected.clear()
            self.history.clear()
            self.turns.clear()

    def note_body(self, media_type: str) -> None:
        """Count one request body of a media type (shows what clients send: kubectl sends
        protobuf for some writes)."""
        with self.lock:
            self.bodies[media_type] += 1

    def pick(
        self, method: str, path: str = "", client: str = "", verb: str = ""
    ) -> tuple[float, Seen]:
        """Decide the fate of one request: the delay in seconds, and its record, whose
        ``code`` is the fault to answer (None: serve it; :data:`DROPPED`, :data:`RESET`,
        :data:`SLOW`: see the module docstring). The server sets the record's
        ``answered`` once it has answered an injected fault."""
        with self.lock:
            delay, code = self._pick(method, verb, client)
            seen = Seen(time.monotonic(), method, path, code, client, verb=verb)
            self.history.append(seen)
            return delay, seen

    def _pick(self, method: str, verb: str, client: str) -> tuple[float, int | None]:
        """:meth:`pick` under the lock."""
        self.requests["total"] += 1
        self.requests[method] += 1
        cfg = self.config
        rate = cfg.verb_rates.get(verb, cfg.rate)
        if (rate <= 0 and not cfg.floor) or (cfg.methods is not None and method not in cfg.methods):
            return 0.0, None
        if client in cfg.spare:
            return 0.0, None
        codes = [c for c in cfg.codes if c != 410 or verb == "watch"]
        if cfg.codes and not codes:
            return 0.0, None
        self.since[verb] += 1
        if self.since[verb] > cfg.floor and self.rng.random() >= rate:
            return 0.0, None
        if not codes:
            code = None
        elif cfg.rotate:
            code = codes[self.turns[verb] % len(codes)]
            self.turns[verb] += 1
        else:
            code = self.rng.choice(codes)
        self.injected[kind_name(code)] += 1
        self.injected["total"] += 1
        if code == SLOW:
            return (cfg.slow_ms or cfg.delay_ms) / 1000.0, code
        return cfg.delay_ms / 1000.0, code

    def error(self, code: int, plural: str, name: str) -> ApiError:
        """The ApiError answered for an injected code."""
        if code == 409:
            what = f'{plural} "{name}"' if name else plural or "the object"
            return ApiError(
                409,
                "Conflict",
                f"Operation cannot be fulfilled on {what}: the object has been "
                "modified; please apply your changes to the latest version and "
                "try again",
                {"name": name, "kind": plural},
            )
        reason, message = _REASONS.get(code, ("InternalError", f"kubesim injected {code}"))
        details: dict[str, Any] | None = None
        headers: dict[str, str] = {}
        if code == 429:
            details = {
                "retryAfterSeconds": self.config.retry_after,
                "causes": [{"message": "kubesim injected a throttling fault"}],
            }
            headers["Retry-After"] = str(self.config.retry_after)
        return ApiError(code, reason, message, details, headers)

    def stats(self) -> dict[str, Any]:
        """Counters as served by ``GET /_kubesim/stats``."""
        with self.lock:
            return {
                "requests": dict(self.requests),
                "bodies": dict(self.bodies),
                "faults": dict(self.injected),
                "config": {
                    "rate": self.config.rate,
                    "codes": list(self.config.codes),
                    "delay_ms": self.config.delay_ms,
                    "retry_after": self.config.retry_after,
                    "methods": list(self.config.methods) if self.config.methods else None,
                    "slow_ms": self.config.slow_ms,
                    "verb_rates": dict(self.config.verb_rates),
                    "rotate": self.config.rotate,
                    "floor": self.config.floor,
                    "spare": list(self.config.spare),
                },
            }
