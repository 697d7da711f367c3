"""Ask the recall server (kirolearn.recall.server) over its Unix socket, within a deadline.

Standard library only: the prompt hook imports it (architecture.md rules 1 and 12). Every failure
(no socket, a stale one, a server that is busy, slow, gone or answers nonsense) returns None and
the caller uses lexical recall; nothing here raises. One request per connection: one JSON line
out, one JSON line back.

The socket is $KIROLEARN_HOME/recall.sock. AF_UNIX paths are short (108 bytes on Linux, 104 on
macOS): a longer one is reached on Linux through /proc/self/fd/<fd of the home folder>/recall.sock
(`socket_address`); elsewhere it cannot be used and the server says so when it starts.
"""

# not socket: it imports enum and selectors (~30 ms cold in the hook)
import _socket
import os
import sys
import time

from kirolearn.core import envnum, jsonfast, paths

PROMPT_DEADLINE = 0.15  # seconds in all: connect, ask, answer
SEARCH_DEADLINE = 2.0  # a loaded server answers in tens of ms
MAX_ANSWER = 4 * 1024 * 1024
# bytes, with the terminating NUL
SUN_PATH_MAX = 104 if sys.platform == "darwin" else 108


def socket_path() -> str:
    """$KIROLEARN_HOME/recall.sock."""
    return paths.recall_socket()


def too_long(path: str) -> bool:
    return len(os.fsencode(path)) >= SUN_PATH_MAX


class _Address:
    """The address to bind or connect to; a Linux /proc/self/fd path when the real one is too long."""

    def __init__(self, path: str):
        self.path, self.fd = path, None
        if not too_long(path):
            self.address = path
            return
        if not sys.platform.startswith("linux"):
            raise OSError(
                f"the socket path {path} is {len(os.fsencode(path))} bytes, more than this "
                f"system's AF_UNIX limit of {SUN_PATH_MAX - 1}"
            )
        self.fd = os.open(
            os.path.dirname(path) or ".", os.O_RDONLY | getattr(os, "O_PATH", 0) | os.O_DIRECTORY
        )
        self.address = f"/proc/self/fd/{self.fd}/{os.path.basename(path)}"

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def socket_address(path: str) -> _Address:
    """An address object for `path` (close() it after bind/connect). Raises OSError when unusable."""
    return _Address(path)


def ask(request: dict, deadline: float = PROMPT_DEADLINE, path: "str | None" = None) -> "dict | None":
    """The server's answer to `request` (a dict with "ok": true), or None on any failure or timeout."""
    end = time.monotonic() + deadline
    path = path or socket_path()
    try:
        if not os.path.exists(path):
            return None  # no server: the common case costs one stat
        # the server skips what came too late
        request = dict(request, deadline=time.time() + deadline)
        data = (jsonfast.dumps(request) + "\n").encode("utf-8", "replace")
        address = _Address(path)
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.settimeout(max(0.001, end - time.monotonic()))
            sock.connect(address.address)
            address.close()
            sock.sendall(data)
            chunks, size = [], 0
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    return None
                sock.settimeout(left)
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if chunk.endswith(b"\n") or size > MAX_ANSWER:
                    break
        finally:
            address.close()
            sock.close()
        answer = jsonfast.loads(b"".join(chunks).decode("utf-8", "replace"))
    except Exception:  # noqa: BLE001 - any failure means: use lexical recall
        return None
    if not isinstance(answer, dict) or answer.get("ok") is not True:
        return None
    return answer


class ServedHits(list):
    """Hits the server answered; `scrubbed`: it re-scrubbed them as manage.clean does (architecture.md rule 9)."""

    scrubbed = False


def hits_of(answer: "dict | None"):
    """The answer's hits as recall.Hit objects (a ServedHits list), or None when it holds none in the expected shape."""
    from kirolearn.recall import lexical as recall

    if answer is None or not isinstance(answer.get("hits"), list):
        return None
    out = ServedHits()
    out.scrubbed = answer.get("scrubbed") is True
    try:
        for d in answer["hits"]:
            hit = recall.Hit(
                d["record_id"],
                d["project_root"],
                d["session_id"],
                d["title"],
                d["summary"],
                d["facts"],
                d["concepts"],
                d["files_touched"],
                d["observation_type"],
                d["strategy"],
                d["created_at"],
                bm25=d.get("bm25") or 0.0,
                actor=d.get("actor"),
                freshness=d.get("freshness"),
                outcome=d.get("outcome"),
                superseded_by=d.get("superseded_by"),
                merged_into=d.get("merged_into"),
            )
            hit.score = float(d.get("score") or 0.0)
            hit.matched_terms = list(d.get("matched_terms") or [])
            out.append(hit)
    except (KeyError, TypeError, ValueError):
        return None
    return out


def prompt_hits(prompt: str, project_id: str, limit: int, exclude=()):
    """Hits to inject for a prompt, chosen by the server (hybrid ranking), or None: use lexical recall."""
    return hits_of(
        ask(
            {
                "op": "prompt",
                "query": prompt,
                "project_id": project_id,
                "limit": limit,
                "exclude": list(exclude),
            },
            _deadline("KIROLEARN_RECALL_DEADLINE_MS", PROMPT_DEADLINE),
        )
    )


def search(query: str, *, project_id, limit: int, **filters):
    """Hybrid search by the server (what `kirolearn search` and MCP run), or None when it is not up."""
    return hits_of(
        ask(
            dict({"op": "search", "query": query, "project_id": project_id, "limit": limit}, **filters),
            SEARCH_DEADLINE,
        )
    )


def _deadline(variable: str, default: float) -> float:
    return envnum.number(variable, default * 1000, 1, 60_000) / 1000


def terminal(text) -> str:
    """Text safe to print on a terminal, as kirolearn.manage.records.terminal makes it for text the server has
    already cleaned and re-scrubbed (kirolearn.privacy.sanitize.visible: standard library only, so
    `kirolearn search` with the server up still skips kirolearn.manage.records's imports: see
    docs/benchmarks.md, 'What the hot paths avoid loading')."""
    from kirolearn.privacy.sanitize import visible

    return visible(text)
