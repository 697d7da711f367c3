"""The viewer's Starlette application: token gate, CSRF-checked forms, server-rendered pages.

Every page reads through kirolearn.manage.records (re-scrubbed data) and renders with
a Jinja2 environment that autoescapes everything; nothing here builds HTML by
string concatenation. Pages page by keyset (created_at, record_id), never by
OFFSET, so the last page of 100k records costs what the first does.
"""

import hashlib
import hmac
import os
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from kirolearn.core.observation_types import OBSERVATION_TYPES, kind_label
from kirolearn.manage import records as manage

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE_SIZE = 50
# best matches shown; the ranking is recall's (kirolearn search)
SEARCH_LIMIT = 25
MAX_FORM_BYTES = 64 * 1024
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # no-referrer would make Chromium send `Origin: null` on our own forms
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
FORBIDDEN = (
    "403 Forbidden: this kirolearn viewer needs its token. Open the URL that `kirolearn serve` printed "
    "(it ends in ?token=...).\n"
)


def shown(value):
    """Every value a template prints (Jinja's finalize), through the outbound sanitiser before autoescape:
    no control, bidi or zero-width character, no Kiro marker, and each line that could pass for a marker
    or an instruction quoted (kirolearn.privacy.sanitize). A string that loses an invisible character is
    re-scrubbed, since a secret it split may be whole again. Markup (HTML a filter made) keeps its lines."""
    if not isinstance(value, str):
        return value
    from markupsafe import Markup

    from kirolearn.privacy.sanitize import clean_text, defuse, guard_lines

    out = clean_text(value)
    if out is not value:
        out = manage.scrubber().scrub_text(out)
    if isinstance(value, Markup):
        return Markup(defuse(out))
    return guard_lines(out)


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(os.path.join(HERE, "templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=shown,
    )
    env.filters["when"] = lambda iso: (iso or "")[:19].replace("T", " ")
    env.filters["match"] = match
    env.filters["oneline"] = lambda text: " ".join(str(text or "").split())
    env.filters["outcome_of"] = outcome_of
    env.filters["where"] = where
    from kirolearn.viewer import markdown

    # markdown-it-py, raw HTML, links and images off
    env.filters["markdown"] = markdown.render
    # a fact: `code` as code, escaped first
    env.filters["inline"] = markdown.render_inline
    # a cut summary whose code spans stay closed
    env.filters["snippet"] = markdown.snippet
    env.globals["mark_labels"] = mark_labels
    env.globals["match_tip"] = MATCH_TIP
    env.globals["event_line"] = manage.event_line
    env.globals["session_label"] = session_label
    env.globals["kind_label"] = kind_label
    env.globals["types"] = OBSERVATION_TYPES
    return env


MATCH_TIP = (
    "How well this record matches the search, relative to the best result (1.00): the ranking of "
    "`kirolearn search` (words and meaning), weighed by the record's type, age and marks"
)


def match(score, best) -> str:
    """A hit's score as a person reads it: relative to the best hit of the page, 0.00 to 1.00."""
    try:
        return f"{max(0.0, min(1.0, float(score) / float(best))):.2f}" if best else "–"
    except (TypeError, ValueError):
        return "–"


MARK_TIPS = {  # what each label means (docs/memory-marks.md)
    "changed since": "What this record says about the code (a setting, a name, lines it wrote) holds another value now: `kirolearn show` says which",
    "gone since": "What this record cites in the code (a setting, a name, a file) is gone",
    "failed attempt": "The turn's work ended in failure: what was tried, not what was done",
}


def mark_labels(record) -> "list[tuple[str, str]]":
    """(label, tooltip) for a record's freshness and outcome when they are not current / unknown."""
    from kirolearn.core import marks

    record = record or {}
    found = marks.labels(record.get("freshness"), record.get("outcome"))
    return [(label, MARK_TIPS.get(label, label)) for label in found]


def outcome_of(summary) -> str:
    """A turn's outcome (its summary's `**Outcome:**` section), for a card that shows only its title."""
    from kirolearn.recall.context import sections

    return " ".join((sections(str(summary or ""), "**").get("Outcome") or "").split())


def where(path) -> str:
    """A project root as its user says it: the home folder as `~` (shorter, and no user name on screen)."""
    path = str(path or "")
    home = os.path.expanduser("~").rstrip(os.sep)
    if home and home != os.sep and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def session_label(label: dict, session_id: str) -> str:
    """A session as a person knows it: its first prompt (cut), not its UUID."""
    prompt = " ".join(str((label or {}).get("prompt") or "").split())
    if not prompt:
        return f"Session {session_id[:8]}"
    return prompt if len(prompt) <= 90 else prompt[:89].rstrip() + "…"


class TokenGate:
    """ASGI middleware: right Host, then the token (query or cookie), else 403; adds the security headers."""

    def __init__(self, app, token: str, hosts: "set[str]", cookie: str):
        self.app, self.token, self.hosts, self.cookie = app, token, hosts, cookie

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.requests import Request

        request = Request(scope)
        if request.headers.get("host", "") not in self.hosts:
            return await self._plain(403, "403 Forbidden: unknown Host header\n", scope, receive, send)
        given = request.query_params.get("token")
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            # Trade the URL's token for a cookie; drop it from the address bar.
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            # never "//host": no redirect off this server
            target = "/" + request.url.path.lstrip("/")
            target += "?" + urlencode(rest) if rest else ""
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path="/")
            return await self._send(response, scope, receive, send)
        cookie = request.cookies.get(self.cookie, "")
        if not hmac.compare_digest(cookie.encode(), self.token.encode()):
            return await self._plain(403, FORBIDDEN, scope, receive, send)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = dict(message, headers=headers)
            await send(message)

        await self.app(scope, receive, with_headers)

    async def _plain(self, status, text, scope, receive, send):
        await self._send(PlainTextResponse(text, status_code=status), scope, receive, send)

    async def _send(self, response: Response, scope, receive, send):
        response.headers.update(SECURITY_HEADERS)
        await response(scope, receive, send)


def create_app(token: str, port: int, extra_hosts=()) -> Starlette:
    """The viewer app for one run: `token` gates it, `port` names the hosts it answers to."""
    env = _env()
    csrf = hmac.new(token.encode(), b"kirolearn-viewer-csrf", hashlib.sha256).hexdigest()
    origins = {f"http://127.0.0.1:{port}", f"http://localhost:{port}"}
    hosts = {f"127.0.0.1:{port}", f"localhost:{port}", *extra_hosts}

    def page(name: str, request, status: int = 200, **context) -> HTMLResponse:
        html = env.get_template(name).render(request=request, csrf=csrf, nav=name, **context)
        return HTMLResponse(html, status_code=status)

    def not_found(request, message: str) -> HTMLResponse:
        return page("error.html", request, status=404, message=message)

    # Pages

    def timeline(request):
        store = manage.open_existing()
        projects = manage.projects(store) if store else []
        pid = request.query_params.get("project") or (projects[0]["project_id"] if projects else None)
        current = next((p for p in projects if p["project_id"] == pid), None)
        before = request.query_params.get("before")
        session = request.query_params.get("session") or None
        rows = []
        if store and current:
            key = tuple(before.split("|", 1)) if before and "|" in before else None
            rows = manage.timeline(pid, session_id=session, before=key, limit=PAGE_SIZE + 1, store=store)
        more = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
        groups = []
        for row in rows:  # consecutive records of one session form one block
            if groups and groups[-1]["session_id"] == row["session_id"]:
                groups[-1]["records"].append(row)
            else:
                groups.append({"session_id": row["session_id"], "records": [row]})
        summaries = manage.session_summaries(project_id=pid, limit=200, store=store) if store and pid else []
        by_session = {}
        for s in summaries:
            by_session.setdefault(s["session_id"], s)
        labels = (
            manage.session_labels(store, pid, [g["session_id"] for g in groups]) if store and groups else {}
        )
        ended = set()
        for g in groups:  # a session's end shows once, in its newest block
            end = by_session.get(g["session_id"]) if g["session_id"] not in ended else None
            ended.add(g["session_id"])
            g["session_end"] = end
            g["label"] = labels.get(g["session_id"]) or {}
            end_ids = {s.get("record_id") for s in summaries if s["session_id"] == g["session_id"]} - {None}
            g["records"] = [r for r in g["records"] if r["record_id"] not in end_ids]
        groups = [g for g in groups if g["records"] or g["session_end"]]
        next_cursor = f"{rows[-1]['created_at']}|{rows[-1]['record_id']}" if more else None
        return page(
            "timeline.html",
            request,
            projects=projects,
            current=current,
            groups=groups,
            next_cursor=next_cursor,
            first_page=not before,
            session=session,
        )

    def search(request):
        q = request.query_params
        query = q.get("q", "")
        filters = {
            "type": q.get("type", ""),
            "since": q.get("since", ""),
            "session": q.get("session", ""),
            "file": q.get("file", ""),
            "project": q.get("project", ""),
        }
        store = manage.open_existing()
        projects = manage.projects(store) if store else []
        root = next((p["project_root"] for p in projects if p["project_id"] == filters["project"]), None)
        error, hits = "", []
        if query.strip():
            try:
                since = manage.parse_since(filters["since"]) if filters["since"] else None
                types = [filters["type"]] if filters["type"] in OBSERVATION_TYPES else None
                hits = manage.search(
                    query,
                    project_root=root,
                    types=types,
                    since=since,
                    session_id=filters["session"] or None,
                    file=filters["file"] or None,
                    limit=SEARCH_LIMIT,
                )
            except manage.ManageError as exc:
                error = str(exc)
        return page(
            "search.html", request, query=query, filters=filters, hits=hits, projects=projects, error=error
        )

    def record(request):
        rid = request.path_params["record_id"]
        try:
            found = manage.show(rid)
        except manage.NotFound:
            return not_found(request, f"No record {rid}.")
        done = request.query_params.get("done", "")
        return page(
            "record.html", request, found=found, done=done if done in ("forget", "restore", "edit") else ""
        )

    def sessions(request):
        store = manage.open_existing()
        pid = request.query_params.get("project") or None
        before = request.query_params.get("before")
        key = tuple(before.split("|", 1)) if before and "|" in before else None
        rows = (
            manage.session_summaries(project_id=pid, limit=PAGE_SIZE + 1, before=key, store=store)
            if store
            else []
        )
        more = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
        for pid_of in {r["project_id"] for r in rows}:
            labels = manage.session_labels(
                store, pid_of, [r["session_id"] for r in rows if r["project_id"] == pid_of]
            )
            for r in rows:
                if r["project_id"] == pid_of:
                    r["label"] = labels.get(r["session_id"]) or {}
        next_cursor = f"{rows[-1]['ended_at']}|{rows[-1]['id']}" if more else None
        return page("sessions.html", request, summaries=rows, next_cursor=next_cursor, project=pid)

    def forgotten(request):
        store = manage.open_existing()
        before = request.query_params.get("before")
        rows = manage.forgotten(limit=PAGE_SIZE + 1, before=before, store=store) if store else []
        more = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
        next_cursor = f"{rows[-1]['forgotten_at']}|{rows[-1]['record_id']}" if more else None
        return page("forgotten.html", request, rows=rows, next_cursor=next_cursor)

    def health(request):
        return page("health.html", request, h=manage.health())

    # Writes: POST only, CSRF token and same origin

    async def _form(request) -> "dict | Response":
        site = request.headers.get("sec-fetch-site")
        origin = request.headers.get("origin")
        if (site and site not in ("same-origin", "none")) or (origin and origin not in origins):
            return PlainTextResponse("403 Forbidden: cross-site request\n", status_code=403)
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return PlainTextResponse("413 form too large\n", status_code=413)
        fields = {
            k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()
        }
        if not hmac.compare_digest(fields.get("csrf", "").encode(), csrf.encode()):
            return PlainTextResponse(
                "403 Forbidden: missing or wrong CSRF token (reload the page)\n", status_code=403
            )
        return fields

    def _write(action):
        async def endpoint(request):
            from starlette.concurrency import run_in_threadpool

            fields = await _form(request)
            if isinstance(fields, Response):
                return fields
            rid = request.path_params["record_id"]
            try:
                await run_in_threadpool(action, rid, fields)
            except manage.NotFound:
                return not_found(request, f"No record {rid}.")
            except manage.ManageError as exc:
                found = await run_in_threadpool(manage.show, rid)
                return page("record.html", request, status=400, found=found, error=str(exc))
            return RedirectResponse(f"/record/{rid}?done={action.__name__}", status_code=303)

        return endpoint

    def forget(rid, fields):
        manage.forget([rid], reason=fields.get("reason", ""), actor="viewer")

    def restore(rid, fields):
        manage.restore([rid], actor="viewer")

    def edit(rid, fields):
        manage.edit(
            rid,
            title=fields.get("title"),
            summary=fields.get("summary"),
            actor="viewer",
            reason=fields.get("reason", ""),
        )

    routes = [
        Route("/", timeline),
        Route("/search", search),
        Route("/record/{record_id}", record),
        Route("/record/{record_id}/forget", _write(forget), methods=["POST"]),
        Route("/record/{record_id}/restore", _write(restore), methods=["POST"]),
        Route("/record/{record_id}/edit", _write(edit), methods=["POST"]),
        Route("/sessions", sessions),
        Route("/forgotten", forgotten),
        Route("/health", health),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Mount("/static", StaticFiles(directory=os.path.join(HERE, "static")), name="static"),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(TokenGate, token=token, hosts=hosts, cookie=f"kirolearn_token_{port}")
    return app
