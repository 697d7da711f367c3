"""Time-ordered unique ids from the standard library alone.

Event ids are ULIDs: 48 bits of Unix milliseconds then 80 random bits, in
Crockford base32 (26 chars), so `sorted()` of ids or of spool file names is
arrival order to the millisecond. uuid/secrets are avoided for import cost.
"""

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # types only: `typing` would cost the hook its import
    from _hashlib import HASH
    from collections.abc import Callable

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ULID_PATTERN = r"^[0-9A-HJKMNP-TV-Z]{26}$"


_last = 0


def new_ulid(now_ms: "int | None" = None) -> str:
    """A new ULID string; `now_ms` fixes the time part (for tests).

    Monotonic within a process: two ids minted in the same millisecond still
    sort in creation order (the second is the first plus one).
    """
    global _last
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    value = (now_ms & 0xFFFFFFFFFFFF) << 80 | int.from_bytes(os.urandom(10), "big")
    if value >> 80 == _last >> 80 and value <= _last:
        value = _last + 1
    _last = value
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def ulid_time_ms(ulid: str) -> int:
    """The millisecond timestamp encoded in a ULID."""
    value = 0
    for ch in ulid[:10]:
        value = value * 32 + _CROCKFORD.index(ch)
    return value


def new_uuid4() -> str:
    """A random RFC 4122 version-4 UUID string (session ids we have to invent)."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# the constructor sha256_hex found, looked for once per process
_SHA256: "Callable[[bytes], HASH] | None" = None


def sha256_hex(data: bytes) -> str:
    """The sha256 hex digest of `data`, without hashlib where CPython has its own sha256.

    `import hashlib` loads OpenSSL's libcrypto; CPython's built-in module (`_sha2` from 3.12,
    `_sha256` before) gives the same digest at a fraction of the cost (docs/benchmarks.md,
    'What the hot paths avoid loading'). Any other interpreter gets hashlib. The search runs once:
    a failed import walks sys.path again every time, and the drain hashes a project path per event.
    """
    global _SHA256
    if _SHA256 is None:
        try:
            from _sha2 import sha256  # CPython 3.12+
        except ImportError:
            try:
                from _sha256 import sha256  # CPython 3.10-3.11
            except ImportError:
                from hashlib import sha256
        _SHA256 = sha256
    return _SHA256(data).hexdigest()


def sha1_hex(data: bytes) -> str:
    """The sha1 hex digest of `data` (git's blob ids), through CPython's own `_sha1` when it has it."""
    try:
        from _sha1 import sha1
    except ImportError:  # another interpreter
        from hashlib import sha1
    digest: str = sha1(data).hexdigest()  # a str either way; _sha1 has no stubs
    return digest


def git_blob_id(data: bytes) -> str:
    """git's blob id of these bytes (sha1 of 'blob <size>\\0' and them)."""
    return sha1_hex(b"blob %d\x00" % len(data) + data)
