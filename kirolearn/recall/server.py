"""The recall server: one long-running process keeps the embedding model loaded and answers recall
queries over a 0600 Unix socket in KIROLEARN_HOME (architecture.md rule 12).

`kirolearn serve-recall` runs it in the foreground (what the user service of `kirolearn schedule
--recall-server` starts); `kirolearn drain --watch` runs it in a thread beside the drain. The prompt
hook, `kirolearn search` and MCP `search_memory` ask it first through kirolearn.recall.client, and
use lexical recall (or load the model themselves) when it is not up, slow or broken. Capture never
needs it.

Protocol: one connection per request; the client sends one JSON line, the server answers one:
  {"op": "ping"}                                    -> {"ok": true, "model": "...", "pid": N}
  {"op": "search", "query", "project_id", "limit", "types", "since", "session_id", "file"}
                                                    -> {"ok": true, "hits": [Hit.to_dict()...]}
  {"op": "prompt", "query", "project_id", "limit", "exclude"}
                                                    -> {"ok": true, "hits": [...]} (what the hook injects)
A request carries its client's deadline (epoch seconds): one that arrives too late is dropped
unanswered. Errors answer {"ok": false, "error": "..."}; the client then falls back.

One server per home: it holds recall.sock.lock (filelock) while it runs, so a second one says so
and exits; a socket file left by a server that died is removed at start.
"""

from __future__ import annotations

import json
import logging
import os
import select
import socket
import threading
import time

from kirolearn.core import paths
from kirolearn.core.errors import KirolearnError
from kirolearn.recall import client

log = logging.getLogger("kirolearn.recall.server")
READ_TIMEOUT = 1.0  # seconds to send the request line
MAX_CONNECTIONS = 16  # more are closed at once: the client falls back
MAX_REQUEST = 256 * 1024
WARM_BUDGET = 60.0  # seconds _warm may take to load a project's vectors


class ServerError(KirolearnError):
    """The recall server cannot start."""

    default_fix = (
        "recall keeps working without it (lexical in the hook, the model loaded per `kirolearn search`)"
    )


class RecallServer:
    """Bind with `start()`, then `serve_forever()` (or `start_thread()`); `close()` removes the socket.

    numpy's BLAS runs on one thread while serving (embeddings.local.one_blas_thread): a query's
    matrices are small, and a second thread mostly waits for a core another process holds
    (measured in docs/benchmarks.md, 'With the local model')."""

    def __init__(self, settings=None, path: str | None = None):
        self.path = path or client.socket_path()
        self._settings = settings
        self._config_stamp = self._stamp() if settings is not None else None
        self.model = None
        self.model_error = ""
        self.sock = None
        self._lock = None
        # BLAS on one thread while serving: measured faster (see RecallServer)
        self._blas = None
        self._stop = threading.Event()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        # requests are read concurrently, answered one at a time
        self._answering = threading.Lock()
        self._thread = None
        self.served = 0

    # Start and stop

    def start(self) -> RecallServer:
        from filelock import FileLock, Timeout

        paths.ensure_private_dir(paths.home())
        lock = FileLock(self.path + ".lock", timeout=0, mode=0o600)
        try:
            lock.acquire()
        except Timeout:
            raise ServerError(
                f"another recall server already serves {self.path}",
                "nothing to do; `kirolearn doctor` shows which model it uses",
            ) from None
        try:
            self._load()
            self._bind()
        except BaseException:
            lock.release()
            raise
        self._lock = lock
        from kirolearn.recall.embeddings.local import one_blas_thread

        self._blas = one_blas_thread()
        self._blas.__enter__()
        return self

    def _bind(self) -> None:
        try:
            address = client.socket_address(self.path)
        except OSError as exc:
            raise ServerError(
                f"cannot serve recall on {self.path}: {exc}",
                "set KIROLEARN_HOME to a shorter path to use the recall server",
            ) from None
        try:
            if os.path.lexists(self.path):
                # we hold the lock: whatever is there was left by a dead server
                os.unlink(self.path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            # created 0600; chmod too, where filesystems ignore the umask
            old = os.umask(0o177)
            try:
                sock.bind(address.address)
            finally:
                os.umask(old)
            os.chmod(self.path, 0o600)
            sock.listen(16)
            sock.setblocking(False)
        finally:
            address.close()
        self.sock = sock

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if self._blas is not None:
            self._blas.__exit__(None, None, None)
            self._blas = None

    def stop(self) -> None:
        self._stop.set()

    def start_thread(self) -> threading.Thread:
        """Serve in a daemon thread (the drain --watch process)."""
        self._thread = threading.Thread(
            target=self.serve_forever, name="kirolearn-recall-server", daemon=True
        )
        self._thread.start()
        return self._thread

    # The model and settings

    @staticmethod
    def _stamp():
        from kirolearn.settings import settings_path

        try:
            st = os.stat(settings_path())
            return (st.st_mtime_ns, st.st_size)
        except OSError:
            return None

    def _settings_now(self):
        """The settings, re-read when config.toml changed (e.g. `kirolearn model install` switched models)."""
        from kirolearn.settings import load

        stamp = self._stamp()
        if self._settings is None or stamp != self._config_stamp:
            self._settings, self._config_stamp, self.model = load(), stamp, None
        return self._settings

    def _load(self) -> None:
        from kirolearn.recall.embeddings.registry import EmbeddingUnavailable, from_settings

        settings = self._settings_now()
        if self.model is not None:
            return
        try:
            model = from_settings(settings)
            if model is not None:
                model.embed_batch(["warm up"])
            self.model, self.model_error = model, ""
        except EmbeddingUnavailable as exc:
            self.model, self.model_error = None, exc.message
            log.warning(
                "recall server: the embedding model cannot load, answering with words alone: %s", exc.message
            )

    # Serving

    def serve_forever(self, should_stop=None) -> None:
        """Accept connections until stop()/close() (or should_stop()); each is read in its own thread,
        within its own READ_TIMEOUT, so a client that connects and says nothing delays no one else."""
        while not self._stop.is_set() and not (should_stop and should_stop()) and self.sock is not None:
            try:
                ready, _, _ = select.select([self.sock], [], [], 0.2)
            except (OSError, ValueError):
                return  # closed under us
            if not ready:
                continue
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                log.warning("recall server: %d connections open already; one refused", MAX_CONNECTIONS)
                conn.close()
                continue
            threading.Thread(
                target=self._serve_one, args=(conn,), name="kirolearn-recall-conn", daemon=True
            ).start()

    def _serve_one(self, conn) -> None:
        try:
            self._handle(conn)
        except Exception:  # noqa: BLE001
            # one bad request never ends the server
            log.exception("recall server: request failed")
        finally:
            conn.close()
            self._slots.release()

    def _handle(self, conn) -> None:
        conn.settimeout(READ_TIMEOUT)
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
            if len(data) > MAX_REQUEST:
                return
        try:
            request = json.loads(data.decode("utf-8", "replace"))
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except ValueError:
            self._send(conn, {"ok": False, "error": "the request is not one JSON object"})
            return
        deadline = request.get("deadline")
        with self._answering:
            if isinstance(deadline, (int, float)) and time.time() > deadline:
                return  # the client has given up already
            try:
                answer = self.answer(request)
            except Exception as exc:  # noqa: BLE001
                # the client falls back; the log keeps why
                log.exception("recall server: %s failed", request.get("op"))
                answer = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            self.served += 1
        self._send(conn, answer)
        if answer.get("ok") is not True:
            with self._answering:
                self._warm(request)

    def _warm(self, request: dict) -> None:
        """Load the project's vectors with time to spare, after an answer that failed (the usual cause: its
        deadline cut the load short). A big project's first load takes longer than the prompt hook waits
        (docs/benchmarks.md, 'With the local model'), and it is kept only once complete: without
        this, every prompt of a big project would run out of time the same way and never be served."""
        if self.model is None or request.get("op") not in ("search", "prompt"):
            return
        from kirolearn.recall import semantic
        from kirolearn.store.backends import open_reading

        store = open_reading(budget=WARM_BUDGET)
        if store is None:
            return
        try:
            # cached
            semantic.Searcher(store, self.model)._index(request.get("project_id") or None)
        except Exception:  # noqa: BLE001
            # warming is best effort; the next request tries again
            log.exception("recall server: loading the project's vectors failed")
        finally:
            store.close()

    @staticmethod
    def _send(conn, answer: dict) -> None:
        try:
            conn.sendall((json.dumps(answer, ensure_ascii=False) + "\n").encode("utf-8", "replace"))
        except OSError:
            pass  # the client went away (its deadline passed)

    def answer(self, request: dict) -> dict:
        """The answer to one decoded request."""
        op = request.get("op")
        self._load()
        if op == "ping":
            return {
                "ok": True,
                "pid": os.getpid(),
                "model": self.model.model_id if self.model else None,
                "model_error": self.model_error,
                "served": self.served,
            }
        if op not in ("search", "prompt"):
            return {"ok": False, "error": f"unknown op {op!r}"}
        query = request.get("query")
        if not isinstance(query, str):
            return {"ok": False, "error": "query must be a string"}
        limit = max(1, min(int(request.get("limit") or 10), 100))
        project_id = request.get("project_id") or None
        from kirolearn.recall import lexical as recall
        from kirolearn.recall import semantic
        from kirolearn.store.backends import open_reading

        deadline = request.get("deadline")
        budget = max(0.05, deadline - time.time()) if isinstance(deadline, (int, float)) else 5.0
        store = open_reading(budget=budget)
        if store is None:
            return {"ok": True, "hits": []}
        conn = store.recall_connection()
        try:
            searcher = semantic.Searcher(store, self.model) if self.model is not None else None
            if op == "prompt":
                exclude = set(request.get("exclude") or ())
                if searcher is None:
                    found = recall.search(conn, query, project_id=project_id, limit=limit * 3)
                    hits = [h for h in recall.relevant(found, query) if h.record_id not in exclude][:limit]
                else:
                    hits = semantic.prompt_hits(
                        searcher, query, project_id=project_id, limit=limit, exclude=exclude
                    )
            else:
                filters = {
                    k: request.get(k) for k in ("types", "since", "session_id", "file") if request.get(k)
                }
                if searcher is None:
                    hits = recall.search(conn, query, project_id=project_id, limit=limit, **filters)
                else:
                    hits = searcher.search(query, project_id=project_id, limit=limit, **filters)
        finally:
            store.close()
        rows = [h.to_dict() for h in hits]
        scrubbed = False
        # re-scrubbed here, where the scrubber stays compiled
        if op == "search":
            from kirolearn.privacy.sanitize import outbound_value
            from kirolearn.privacy.scrub import Scrubber

            # extra patterns and allow-list, as manage.scrubber()
            conf = self._settings_now()
            # once per config version
            if getattr(self, "_scrubber_for", None) is not conf:
                self._scrubber_for, self._scrubber = (
                    conf,
                    Scrubber(conf.scrub.extra_patterns, conf.scrub.allow),
                )
            rows = outbound_value(rows, self._scrubber)
            scrubbed = True
        return {
            "ok": True,
            "hits": rows,
            "scrubbed": scrubbed,
            "model": self.model.model_id if self.model else None,
        }


def start_in_thread(settings=None) -> RecallServer | None:
    """A server serving in a daemon thread (the drain --watch process), or None: embeddings are off
    (the hook's own lexical recall is the same answer, without the round trip), or one cannot start
    here (logged)."""
    from kirolearn.recall.embeddings.registry import OFF
    from kirolearn.settings import load

    if (settings or load()).embeddings.model.strip().lower() in OFF:
        return None
    try:
        server = RecallServer(settings).start()
    except ServerError as exc:
        log.warning("recall server not started: %s", exc)
        return None
    server.start_thread()
    return server
