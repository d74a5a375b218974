"""SPDY/3.1 framing, the server's side, as far as Kubernetes' streaming protocols use it.

A frame is 8 bytes of head and its payload. A control frame's head is the control bit,
the version (3) and its type, then flags and a 24-bit length; a data frame's is a 31-bit
stream id, then flags and length. Header blocks (SYN_STREAM, SYN_REPLY, HEADERS) are
counted name/value pairs of 32-bit lengths, zlib-compressed with the protocol's fixed
dictionary, one compression stream per direction for the whole connection (each block
ends with a sync flush). Flow control (WINDOW_UPDATE) is read and ignored, as the Go
implementation behind kubectl and the kubelet does.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

VERSION = 3
FLAG_FIN = 0x01

SYN_STREAM = 1
SYN_REPLY = 2
RST_STREAM = 3
SETTINGS = 4
PING = 6
GOAWAY = 7
HEADERS = 8
WINDOW_UPDATE = 9

# RST_STREAM status codes used here.
PROTOCOL_ERROR = 1
INVALID_STREAM = 2
REFUSED_STREAM = 3

_MAX_PAYLOAD = (1 << 24) - 1

# The header compression dictionary of SPDY/3 (draft-mbelshe-httpbis-spdy-00, 2.6.10.1):
# these words (``_`` a space inside one), each after its 32-bit big-endian length, then
# the tail as is.
_WORD_TEXT = (
    "options head post put delete trace accept accept-charset accept-encoding "
    "accept-language accept-ranges age allow authorization cache-control connection "
    "content-base content-encoding content-language content-length content-location "
    "content-md5 content-range content-type date etag expect expires from host if-match "
    "if-modified-since if-none-match if-range if-unmodified-since last-modified location "
    "max-forwards pragma proxy-authenticate proxy-authorization range referer retry-after "
    "server te trailer transfer-encoding upgrade user-agent vary via warning "
    "www-authenticate method get status 200_OK version HTTP/1.1 url public set-cookie "
    "keep-alive origin"
)
_WORDS = [word.replace("_", " ") for word in _WORD_TEXT.split(" ")]
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502"
    "504505203 Non-Authoritative Information204 No Content301 Moved Permanently"
    "400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error"
    "501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct "
    "Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,"
    "image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,"
    "publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()


class ProtocolError(Exception):
    """The peer broke SPDY's framing: the session ends (GOAWAY)."""


@dataclass
class Frame:
    """One frame read: a control frame (``kind`` its type) or data (``kind`` 0)."""

    kind: int
    flags: int
    stream: int = 0
    payload: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def fin(self) -> bool:
        """Whether the sender's side of the stream ends with this frame."""
        return bool(self.flags & FLAG_FIN)


class Codec:
    """One connection's framing: bytes in, :class:`Frame` out; frames to bytes."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zdict=DICTIONARY)

    # -- reading ------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Frame]:
        """The whole frames ``data`` completes (a partial one waits for more)."""
        self._buffer += data
        frames = []
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if len(self._buffer) < 8 + length:
                break
            head, payload = bytes(self._buffer[:8]), bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            frames.append(self._frame(head, payload))
        return frames

    def _frame(self, head: bytes, payload: bytes) -> Frame:
        first, flags = int.from_bytes(head[:4], "big"), head[4]
        if not first & 0x80000000:
            return Frame(0, flags, first & 0x7FFFFFFF, payload)
        version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise ProtocolError(f"unsupported SPDY version {version}")
        frame = Frame(kind, flags, payload=payload)
        if kind in (SYN_STREAM, SYN_REPLY, HEADERS, RST_STREAM, WINDOW_UPDATE):
            if len(payload) < 4:
                raise ProtocolError(f"control frame {kind} too short")
            frame.stream = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
        block = {SYN_STREAM: 10, SYN_REPLY: 4, HEADERS: 4}.get(kind)
        if block is not None:
            frame.headers = self._headers(payload[block:])
        return frame

    def _headers(self, compressed: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(compressed)
        except zlib.error as exc:
            raise ProtocolError(f"bad header block: {exc}") from None
        headers: dict[str, str] = {}
        try:
            (count,), at = struct.unpack_from(">I", raw), 4
            for _ in range(count):
                (n,) = struct.unpack_from(">I", raw, at)
                name = raw[at + 4 : at + 4 + n].decode("latin-1").lower()
                at += 4 + n
                (n,) = struct.unpack_from(">I", raw, at)
                # Several values of one name are joined by NUL; the first is the one used.
                headers[name] = raw[at + 4 : at + 4 + n].decode("latin-1").split("\0")[0]
                at += 4 + n
        except struct.error:
            raise ProtocolError("truncated header block") from None
        return headers

    # -- writing ------------------------------------------------------------------

    def _control(self, kind: int, flags: int, payload: bytes) -> bytes:
        head = struct.pack(">HH", 0x8000 | VERSION, kind)
        return head + bytes([flags]) + len(payload).to_bytes(3, "big") + payload

    def _block(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers))
        for name, value in headers.items():
            for part in (name.lower().encode("latin-1"), value.encode("latin-1")):
                raw += struct.pack(">I", len(part)) + part
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def syn_reply(self, stream: int, headers: dict[str, str] | None = None) -> bytes:
        """Accept the peer's stream ``stream``."""
        return self._control(SYN_REPLY, 0, struct.pack(">I", stream) + self._block(headers or {}))

    def rst_stream(self, stream: int, status: int) -> bytes:
        """End stream ``stream`` abruptly with ``status``."""
        return self._control(RST_STREAM, 0, struct.pack(">II", stream, status))

    def ping(self, ping_id: int) -> bytes:
        """A PING (the answer to one carries the same id)."""
        return self._control(PING, 0, struct.pack(">I", ping_id))

    def goaway(self, last_stream: int, status: int = 0) -> bytes:
        """The session ends; streams above ``last_stream`` were not taken."""
        return self._control(GOAWAY, 0, struct.pack(">II", last_stream, status))

    @staticmethod
    def data(stream: int, data: bytes, *, fin: bool = False) -> bytes:
        """``data`` on ``stream`` (in as many frames as it takes), FIN on the last."""
        chunks = [data[i : i + _MAX_PAYLOAD] for i in range(0, len(data), _MAX_PAYLOAD)] or [b""]
        out = b""
        for i, chunk in enumerate(chunks):
            flags = FLAG_FIN if fin and i == len(chunks) - 1 else 0
            out += struct.pack(">I", stream) + bytes([flags]) + len(chunk).to_bytes(3, "big")
            out += chunk
        return out


__all__ = ["DICTIONARY", "Codec", "Frame", "ProtocolError"]
