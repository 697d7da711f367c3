"""`kirolearn.Memory`: the library facade over one kirolearn home.

    >>> from kirolearn import Memory
    >>> mem = Memory(home="/tmp/kl-home")          # default: $KIROLEARN_HOME or ~/.kirolearn
    >>> mem.drain()                                 # spool → store, like `kirolearn drain`
    >>> mem.search("login 500", project="/src/api")  # ranked hits, like `kirolearn search`

Every method opens what it needs and closes it again, so a Memory object is
cheap to keep and safe to share between calls; it never holds the drain lock
between calls. The heavy libraries (sqlite-utils, pydantic, litellm) are
imported on first use, never by `import kirolearn`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from typing import IO

from kirolearn.core import paths


class Memory:
    """Search, context, observations, summaries, drain, export/import and forget for one home."""

    def __init__(self, home: str | os.PathLike | None = None, *, settings=None):
        self.home = os.path.abspath(os.path.expanduser(os.fspath(home))) if home is not None else None
        # None: read config.toml and KIROLEARN_* on each call
        self.settings = settings

    def _settings(self):
        from kirolearn.settings import load

        return self.settings if self.settings is not None else load()

    def __repr__(self) -> str:
        return f"Memory(home={self.home or paths.home()!r})"

    # Plumbing

    @contextlib.contextmanager
    def _here(self):
        with paths.using_home(self.home):
            # a home that is a file: HomeError, as the CLI says
            paths.check_home()
            yield

    @staticmethod
    def _root(project: str | os.PathLike | None) -> str:
        from kirolearn.core.project import find_project_root

        root, _ = find_project_root(paths.check_project(project) if project else os.getcwd())
        return root

    @contextlib.contextmanager
    def _store(self):
        """This home's store, opened (created) for the call and closed after it."""
        from kirolearn.store.backends import open_store

        with open_store() as store:
            yield store

    @contextlib.contextmanager
    def _reading(self):
        """This home's store read-only (the caller checked the file exists), closed after the call."""
        from kirolearn.store.backends import open_reading

        store = open_reading(budget=5.0)
        try:
            yield store
        finally:
            if store is not None:
                store.close()

    def _scrubber(self, settings=None):
        from kirolearn.privacy.scrub import Scrubber

        conf = settings or self._settings()
        return Scrubber(conf.scrub.extra_patterns, conf.scrub.allow)

    # The pipeline

    def drain(
        self,
        *,
        flush: bool = False,
        wait: float | None = None,
        complete=None,
        progress=None,
        watch: bool = False,
        on_pass=None,
        on_start=None,
        bars=None,
    ):
        """Store what the spool holds and extract records, as `kirolearn drain`; returns DrainStats.

        `progress(done)` is called as spool files are stored; `bars` (kirolearn.cli.progress.Bars) shows
        the backfills' progress to a person at a terminal. With `watch`, it keeps
        draining as events arrive until interrupted, calling `on_pass(stats)` after
        each pass (each pass is recorded for `status`). `on_start()` runs once the
        drain lock is held. Raises `kirolearn.core.errors.DrainLocked` when another drain
        holds the lock; any failure is recorded for `status` and `doctor`.
        """
        from dataclasses import asdict

        from kirolearn.core.ids import new_ulid
        from kirolearn.core.isotime import now_iso
        from kirolearn.health import drain_finished, drain_started
        from kirolearn.pipeline import drain

        with self._here():
            settings = self._settings()
            held = drain.lock(wait=settings.drain.lock_wait_seconds if wait is None else wait)
            drain_started()
            try:
                with self._store() as store:
                    started = now_iso()
                    if on_start is not None:
                        on_start()
                    drainer = drain.Drainer(store, settings, complete=complete, progress=progress, bars=bars)
                    if watch:

                        def each_pass(stats):
                            # status sees it
                            store.record_drain(new_ulid(), now_iso(), asdict(stats))
                            if on_pass is not None:
                                on_pass(stats)

                        stats = drainer.watch(on_pass=each_pass)
                    else:
                        stats = drainer.run_once(flush=flush)
                    store.record_drain(new_ulid(), started, asdict(stats))
            except BaseException as exc:
                # for `doctor` and `status`, even when the database failed
                drain_finished(exc)
                raise
            finally:
                held.release()
            drain_finished(None)
            return stats

    # Recall

    def search(
        self,
        query: str,
        *,
        project=None,
        all_projects: bool = False,
        types: Iterable[str] | None = None,
        limit: int = 10,
        since: str | None = None,
        session_id: str | None = None,
        file: str | None = None,
    ) -> list:
        """Records matching `query`, best first (`lexical.Hit` objects; `.to_dict()` for JSON).

        `since` (a store timestamp), `session_id` and `file` narrow it as `kirolearn search` does.
        """
        from kirolearn.recall import client, context

        with self._here():
            project_id = None if all_projects else context.project_id(self._root(project))
            if not os.path.exists(paths.db_path()):
                return []
            served = client.search(
                query,
                project_id=project_id,
                limit=limit,
                types=list(types or []) or None,
                since=since,
                session_id=session_id,
                file=file,
            )  # the recall server, if up
            if served is not None:
                return served
            from kirolearn.recall import semantic

            # hybrid (words + vectors) when the embedding model loads
            with self._reading() as store:
                return semantic.search(
                    store,
                    query,
                    project_id=project_id,
                    types=list(types or []) or None,
                    limit=limit,
                    since=since,
                    session_id=session_id,
                    file=file,
                )

    def context(self, *, project=None, prompt: str | None = None, session_id: str | None = None) -> str:
        """What the hook would inject: the session-start block, or the block for `prompt` (in session
        `session_id` as it stands, else as the first prompt of a new session: context.prompt_preview)."""
        from kirolearn.recall import context

        with self._here():
            root = self._root(project)
            if not os.path.exists(paths.db_path()):
                return ""
            conf = context.settings()
            with self._reading() as store:
                conn = store.recall_connection() if store is not None else None
                if prompt is None:
                    text, _ = context.session_start(conn, root, conf=conf)
                else:
                    text, _ = context.prompt_preview(conn, root, prompt, session_id=session_id, conf=conf)
            return text

    def observations(
        self, *, project=None, all_projects: bool = False, types: Iterable[str] | None = None, limit: int = 20
    ) -> list:
        """The newest records of a project (or of all projects), newest first."""
        from kirolearn.recall import context, lexical

        with self._here():
            pid = None if all_projects else context.project_id(self._root(project))
            if not os.path.exists(paths.db_path()):
                return []
            with self._reading() as store:
                conn = store.recall_connection()
                if all_projects:
                    ids = [p["project_id"] for p in store.projects()]
                    hits = [
                        h
                        for pid in ids
                        for h in lexical.latest(conn, pid, types=list(types or []) or None, limit=limit)
                    ]
                    return sorted(hits, key=lambda h: h.created_at, reverse=True)[:limit]
                assert pid is not None  # one project: its id was found above
                return lexical.latest(conn, pid, types=list(types or []) or None, limit=limit)

    # Summaries

    def save_turn_summary(
        self,
        *,
        request: str,
        investigated: str,
        learned: str,
        completed: str,
        next_steps: str,
        files_read=(),
        files_modified=(),
        project=None,
        agent=None,
        session_id=None,
    ):
        """Save a structured turn summary (the MCP tool's twin); returns the MemoryRecord. `agent` and
        `session_id` name who saved it (default: the session's agent, else kiro; the session `mcp`)."""
        from kirolearn.pipeline import summaries

        with self._here(), self._store() as store:
            return summaries.save_turn_summary(
                store,
                summaries.Project(self._root(project)),
                request=request,
                investigated=investigated,
                learned=learned,
                completed=completed,
                next_steps=next_steps,
                files_read=list(files_read),
                files_modified=list(files_modified),
                scrubber=self._scrubber(),
                agent=agent,
                session_id=session_id,
            )

    def save_observation(
        self,
        *,
        title: str,
        summary: str,
        observation_type: str,
        facts=(),
        concepts=(),
        files_touched=(),
        project=None,
        agent=None,
        session_id=None,
    ):
        """Save one hand-made observation (the MCP tool's twin); returns the MemoryRecord (`agent`,
        `session_id`: as save_turn_summary)."""
        from kirolearn.pipeline import summaries

        with self._here(), self._store() as store:
            return summaries.save_observation(
                store,
                summaries.Project(self._root(project)),
                title=title,
                summary=summary,
                observation_type=observation_type,
                facts=list(facts),
                concepts=list(concepts),
                files_touched=list(files_touched),
                scrubber=self._scrubber(),
                agent=agent,
                session_id=session_id,
            )

    def end_session(
        self,
        session_id: str,
        *,
        summary: str | None = None,
        highlights=None,
        pitfalls=None,
        next_steps=None,
        open_questions=None,
        label: str = "general",
        auto_compress: bool = False,
        transcript: str | None = None,
        project=None,
        complete=None,
        agent=None,
    ) -> dict:
        """Save an end-of-session summary (the `session_end` tool); returns its result object."""
        from kirolearn.pipeline import summaries

        with self._here(), self._store() as store:
            settings = self._settings()
            return summaries.session_end(
                store,
                summaries.Project(self._root(project)),
                session_id=session_id,
                summary=summary,
                highlights=highlights,
                pitfalls=pitfalls,
                next_steps=next_steps,
                open_questions=open_questions,
                label=label,
                auto_compress=auto_compress,
                transcript=transcript,
                settings=settings,
                complete=complete,
                scrubber=self._scrubber(settings),
                agent=agent,
            )

    def init_session(self, *, label: str = "general", project=None) -> dict:
        """The newest end-of-session summary for the project (the `session_init` tool).

        Reading only: a fresh home answers "nothing yet" and gets no database.
        """
        from kirolearn.pipeline import summaries
        from kirolearn.store.backends import open_empty, open_existing

        with self._here():
            # an empty store answers exactly as a fresh one would
            with open_existing() or open_empty() as store:
                return summaries.session_init(store, summaries.Project(self._root(project)), label)

    # Backup

    def export(self, out: IO[str]) -> int:
        """Write every stored object as JSON Lines (the `kirolearn export` format); returns the line count.

        Raises `kirolearn.core.errors.NoStore` on a home with no database yet (it creates none).
        """
        from kirolearn.core.errors import NoStore
        from kirolearn.store.backends import open_existing

        with self._here():
            store = open_existing()
            if store is None:
                raise NoStore(f"no database at {paths.db_path()}")
            with store:
                return store.export(out)

    def import_(self, source: IO[str] | Iterable[str]) -> dict:
        """Restore an export (`kirolearn import`): idempotent, ids kept, everything scrubbed; returns counts."""
        from kirolearn.manage import records as manage

        with self._here():
            return manage.import_lines(source)

    # Managing records

    def forget(self, record_ids: Iterable[str], *, reason: str = "") -> list:
        """Take records out of recall for good (a tombstone; `restore` undoes it until a purge)."""
        from kirolearn.manage import records as manage

        ids = list(record_ids)
        with self._here():
            # a lost database is StoreLost, as in the CLI
            store = manage.open_existing()
            if store is None:
                if ids:
                    raise manage.NotFound(f"no record {ids[0]!r}: there is no database yet")
                return []
            with store:
                # NotFound for an unknown id
                targets = manage.resolve_targets(record_ids=ids, store=store)
                if not targets:  # already forgotten: a no-op, as in the CLI
                    return []
                return manage.forget(
                    [r["record_id"] for r in targets], reason=reason, actor="library", store=store
                )

    def restore(self, record_ids: Iterable[str]) -> list:
        """Bring forgotten records back."""
        from kirolearn.manage import records as manage

        with self._here():
            return manage.restore(list(record_ids), actor="library")
