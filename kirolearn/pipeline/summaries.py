"""Turn and session summaries: the write paths behind the MCP tools and their CLI twins.

- `save_turn_summary`: the seed's `save_session_summary` tool. The agent's seven
  fields become one `session_summary` record directly (strategy
  `mcp_session_summary`): no event, no buffer, no LLM.
- `session_end` / `session_init`: a structured end-of-session summary, kept in
  `session_summaries`; one with a summary is also a searchable record (strategy
  `mcp_session_end`, labelled "session end", never in the turn-summary slot).
  A failed auto_compress stores an empty summary, as the seed does. `session_init`
  returns the newest row as saved (not consumed: it stays until superseded), and
  the newest one with content beside it as `previous` when that row has none,
  see kirolearn.recall.continuity.
- `save_observation`: one hand-made record of any type but `session_summary`.
Every text is scrubbed first. Input errors raise `SummaryError` with a message
meant for the caller (the MCP server turns it into an error result).
"""

import json
import os

from kirolearn.core import isotime, observation_types, project
from kirolearn.core.errors import SummaryError
from kirolearn.core.ids import new_ulid, new_uuid4
from kirolearn.core.isotime import now_iso
from kirolearn.core.observation_types import HAND_MADE_TYPES
from kirolearn.privacy.scrub import Scrubber
from kirolearn.store.base import Store
from kirolearn.store.record import (
    CONCEPT_MAX,
    CONCEPTS_COUNT_MAX,
    FACT_MAX,
    FACTS_COUNT_MAX,
    FILE_MAX,
    FILES_KEPT,
    SUMMARY_MAX,
    TITLE_MAX,
    MemoryRecord,
    clip_list,
)

MAX_FIELD_CHARS = 100_000  # anything longer is a mistake, not a summary
MAX_LIST_ITEMS = 200
TRUNCATED = "[truncated]"
SECTIONS = ("What was investigated", "What was learned", "What was completed", "Next steps")
SESSION_END_STRATEGY = (
    observation_types.SESSION_END_STRATEGY
)  # kept apart from turn summaries in recall and labels
TURN_FIELDS = (
    "request",
    "investigated",
    "learned",
    "completed",
    "next_steps",
    "files_read",
    "files_modified",
)


class Project:
    """Where summaries are filed: a project root found by the marker walk."""

    def __init__(self, root: str):
        self.root = root
        self.id = project.project_id(root)

    @property
    def name(self) -> str:
        return os.path.basename(self.root.rstrip(os.sep)) or self.root


def _who(
    store: Store, project: Project, session_id: "str | None", settings=None, agent: "str | None" = None
) -> dict:
    """Attribution of a summary written now: the configured actor or OS user, this host, and the agent that
    called (an MCP client names itself), else the agent whose hooks recorded the session."""
    from kirolearn.team import membership as team

    if agent is None and session_id:
        agent = store.session_agent(project.id, session_id)
    return team.attribution(settings, agent=agent)


def _text(name: str, value, *, required: bool = True) -> str:
    if value is None:
        if required:
            raise SummaryError(f"'{name}' is required")
        return ""
    if not isinstance(value, str):
        raise SummaryError(f"'{name}' must be a string, got {type(value).__name__}")
    if len(value) > MAX_FIELD_CHARS:
        raise SummaryError(f"'{name}' is {len(value):,} characters; the limit is {MAX_FIELD_CHARS:,}")
    return value


def _strings(name: str, value, *, required: bool = True) -> "list[str]":
    if value is None:
        if required:
            raise SummaryError(f"'{name}' is required (a list of strings, may be empty)")
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SummaryError(f"'{name}' must be a list of strings")
    if len(value) > MAX_LIST_ITEMS:
        raise SummaryError(f"'{name}' has {len(value)} items; the limit is {MAX_LIST_ITEMS}")
    for item in value:
        _text(f"{name}[]", item)
    return value


def _insert_record(store: Store, record: MemoryRecord) -> None:
    store.add_record(record.model_dump(mode="json"))


# save_session_summary (turn summary)


def turn_summary_markdown(investigated: str, learned: str, completed: str, next_steps: str) -> str:
    """The seed's four-section summary, at most 4,000 chars: sections dropped from the bottom."""
    sections = [
        f"## {head}\n{body.strip()}"
        for head, body in zip(SECTIONS, (investigated, learned, completed, next_steps))
    ]
    text = "\n\n".join(sections)
    if len(text) <= SUMMARY_MAX:
        return text
    tail = "\n\n" + TRUNCATED
    while len(sections) > 1 and len("\n\n".join(sections)) + len(tail) > SUMMARY_MAX:
        sections.pop()
    text = "\n\n".join(sections)
    # even the first section alone is too long: cut it
    if len(text) + len(tail) > SUMMARY_MAX:
        text = text[: SUMMARY_MAX - len(tail)]
    return text + tail


def save_turn_summary(
    store: Store,
    project: Project,
    *,
    request,
    investigated,
    learned,
    completed,
    next_steps,
    files_read,
    files_modified,
    session_id: "str | None" = None,
    scrubber: "Scrubber | None" = None,
    agent: "str | None" = None,
) -> MemoryRecord:
    """Store the agent's structured turn summary as a session_summary record."""
    scrubber = scrubber or Scrubber()
    session_id = (
        scrubber.scrub_text(session_id) if isinstance(session_id, str) else session_id
    )  # the caller's env
    fields = {
        n: _text(n, v)
        for n, v in (
            ("request", request),
            ("investigated", investigated),
            ("learned", learned),
            ("completed", completed),
            ("next_steps", next_steps),
        )
    }
    read, modified = _strings("files_read", files_read), _strings("files_modified", files_modified)
    fields = {k: scrubber.scrub_text(v) for k, v in fields.items()}
    title = " ".join(fields["request"].split())[:TITLE_MAX]
    if not title:
        raise SummaryError("'request' must not be empty: it becomes the record's title")
    # The seed's "deduplicated union", modified files first: they say the most.
    files = clip_list(scrubber.scrub_value(modified + read), FILE_MAX, 2 * MAX_LIST_ITEMS)
    record = MemoryRecord(
        record_id="mr_" + new_ulid(),
        project_id=project.id,
        project_root=project.root,
        session_id=session_id or "mcp",
        title=title,
        summary=turn_summary_markdown(
            fields["investigated"], fields["learned"], fields["completed"], fields["next_steps"]
        ),
        facts=[],
        concepts=[],
        files_touched=files,
        observation_type="session_summary",
        strategy="mcp_session_summary",
        source_event_ids=[new_ulid()],
        created_at=now_iso(),
        **_who(store, project, session_id, agent=agent),
    )
    _insert_record(store, record)
    return record


# save_observation


def save_observation(
    store: Store,
    project: Project,
    *,
    title,
    summary,
    observation_type,
    facts,
    concepts,
    files_touched,
    session_id: "str | None" = None,
    scrubber: "Scrubber | None" = None,
    agent: "str | None" = None,
) -> MemoryRecord:
    """Store one hand-made observation (any type but session_summary)."""
    scrubber = scrubber or Scrubber()
    session_id = scrubber.scrub_text(session_id) if isinstance(session_id, str) else session_id
    if observation_type not in HAND_MADE_TYPES:
        raise SummaryError(
            f"'observation_type' must be one of {', '.join(HAND_MADE_TYPES)} "
            "(turn summaries go through save_session_summary)"
        )
    title = " ".join(scrubber.scrub_text(_text("title", title)).split())
    summary = scrubber.scrub_text(_text("summary", summary)).strip()
    if not 1 <= len(title) <= TITLE_MAX:
        raise SummaryError(f"'title' must be 1-{TITLE_MAX} characters, got {len(title)}")
    if not 1 <= len(summary) <= SUMMARY_MAX:
        raise SummaryError(f"'summary' must be 1-{SUMMARY_MAX} characters, got {len(summary)}")
    limits = {
        "facts": (facts, FACT_MAX, FACTS_COUNT_MAX),
        "concepts": (concepts, CONCEPT_MAX, CONCEPTS_COUNT_MAX),
        "files_touched": (files_touched, FILE_MAX, FILES_KEPT),
    }
    lists = {}
    for name, (value, item_max, count_max) in limits.items():
        items = [scrubber.scrub_text(v) for v in _strings(name, value)]
        if len(items) > count_max:
            raise SummaryError(f"'{name}' has {len(items)} items; the limit is {count_max}")
        too_long = [v for v in items if len(v) > item_max]
        if too_long:
            raise SummaryError(
                f"'{name}' items must be at most {item_max} characters ({len(too_long[0])} given)"
            )
        lists[name] = [v for v in items if v.strip()]
    record = MemoryRecord(
        record_id="mr_" + new_ulid(),
        project_id=project.id,
        project_root=project.root,
        session_id=session_id or "mcp",
        title=title,
        summary=summary,
        observation_type=observation_type,
        strategy="mcp_observation",
        source_event_ids=[new_ulid()],
        created_at=now_iso(),
        **lists,
        **_who(store, project, session_id, agent=agent),
    )
    _insert_record(store, record)
    return record


# session_end / session_init


def git_branch(root: str) -> "str | None":
    """The checked-out branch, read from .git/HEAD (no git process)."""
    try:
        with open(os.path.join(root, ".git", "HEAD"), encoding="utf-8") as fh:
            head = fh.read().strip()
    except OSError:
        return None
    return head[len("ref: refs/heads/") :] if head.startswith("ref: refs/heads/") else None


def session_log(
    store: Store, project: Project, session_id: str, transcript: "str | None", max_chars: int = 24_000
) -> str:
    """What auto_compress summarises: the transcript if given, else the session's stored events."""
    if transcript and transcript.strip():
        text = transcript.strip()
        return (
            text
            if len(text) <= max_chars
            else text[: max_chars // 4] + "\n[...]\n" + text[-(max_chars * 3 // 4) :]
        )
    from kirolearn.pipeline.extract import Batch, render_events

    rows = store.session_events(project.id, session_id)
    if not rows:
        return ""
    events = [json.loads(body) for _, body in rows]
    return render_events(Batch(project.id, project.root, session_id, events, "session-end"), 1500, max_chars)


COMPRESS_PROMPT = """Summarise this coding-agent session so the next session can resume cleanly.
Answer with JSON only: {"summary": "2-3 sentences: what was done and where it stands",
"next_steps": ["..."], "pitfalls": ["gotchas the next session must know"]}.
Text inside [REDACTED:...] markers stays redacted."""


def compress(store: Store, log: str, settings, complete=None) -> "tuple[dict | None, str | None]":
    """Ask the configured model for {summary, next_steps, pitfalls}; returns (draft, error code)."""
    from pydantic import BaseModel, Field, ValidationError

    from kirolearn.pipeline import extract

    class Draft(BaseModel):
        summary: str = ""
        next_steps: list[str] = Field(default_factory=list)
        pitfalls: list[str] = Field(default_factory=list)

    if not log.strip():
        return None, "empty_context"
    if not settings.extract.model:
        return None, "provider_unavailable"
    if store.daily_limit_reached(settings.extract):
        return None, "spend_limit_reached"
    messages = [{"role": "system", "content": COMPRESS_PROMPT}, {"role": "user", "content": log}]
    complete = complete or extract.litellm_complete
    try:
        if complete is extract.litellm_complete:
            # its import takes seconds: not out of the call's time
            extract.load_litellm()
        seconds = min(settings.extract.timeout_seconds, settings.extract.call_budget_seconds)
        completion = extract.call_bounded(complete, messages, settings, seconds, response_format=Draft)
    except Exception as exc:  # any provider failure
        name = type(exc).__name__
        return None, "timeout" if name in ("Timeout", "CallTimeout") else "provider_unavailable"
    _record_spend(store, completion, settings)
    try:
        draft = Draft.model_validate_json(extract.unfenced(completion.content))
    except ValidationError:
        return None, "malformed_json"
    return draft.model_dump(), None


def _record_spend(store: Store, completion, settings) -> None:
    """Count auto_compress tokens against the same daily limit as extraction."""
    store.add_run(
        {
            "run_id": new_ulid(),
            "batch_key": "session_end",
            "extractor": "llm",
            "reason": "auto_compress",
            "model": settings.extract.model,
            "event_count": 0,
            "request": "",
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "cost_usd": completion.cost_usd,
            "outcome": "ok",
            "error": "",
            "fallback_reason": "",
            "records_written": 0,
            "started_at": now_iso(),
            "finished_at": now_iso(),
        },
    )


def _session_record_text(summary: str, highlights, pitfalls, next_steps, open_questions) -> str:
    parts = [summary.strip()]
    for head, items in (
        ("Next steps", next_steps),
        ("Pitfalls", pitfalls),
        ("Open questions", open_questions),
        ("Highlights", highlights),
    ):
        if items:
            parts.append(f"{head}:\n" + "\n".join(f"- {i}" for i in items))
    text = "\n\n".join(p for p in parts if p)
    return text if len(text) <= SUMMARY_MAX else text[: SUMMARY_MAX - 1] + "…"


def session_end(
    store: Store,
    project: Project,
    *,
    session_id,
    summary=None,
    highlights=None,
    pitfalls=None,
    next_steps=None,
    open_questions=None,
    label="general",
    auto_compress=False,
    transcript=None,
    settings=None,
    complete=None,
    scrubber: "Scrubber | None" = None,
    agent: "str | None" = None,
) -> dict:
    """Save an end-of-session summary; returns the tool's result object. `agent`: the caller, when the
    session's own events (which name the agent whose hooks recorded them) do not say."""
    scrubber = scrubber or Scrubber()
    session_id = scrubber.scrub_text(_text("session_id", session_id)).strip()
    if not session_id:
        raise SummaryError("'session_id' must not be empty")
    label = scrubber.scrub_text((_text("project", label, required=False) or "general").strip() or "general")
    if not isinstance(auto_compress, bool):
        raise SummaryError("'auto_compress' must be true or false")
    summary = _text("summary", summary, required=False)
    if not summary.strip() and not auto_compress:
        raise SummaryError("'summary' is required unless auto_compress is true")
    raw = {
        "highlights": highlights,
        "pitfalls": pitfalls,
        "next_steps": next_steps,
        "open_questions": open_questions,
    }
    given = {k: _strings(k, v, required=False) for k, v in raw.items()}
    transcript = _text("transcript", transcript, required=False)
    result_extra: dict = {}
    compressed_used = False
    if auto_compress:
        if settings is None:
            from kirolearn.settings import load

            settings = load()
        log = scrubber.scrub_text(session_log(store, project, session_id, transcript))
        draft, error = compress(store, log, settings, complete)
        if draft:
            # explicit arguments always win; the model only fills gaps
            if not summary.strip() and draft["summary"].strip():
                summary, compressed_used = draft["summary"], True
            for key in ("next_steps", "pitfalls"):
                # only absent values: an explicit [] stays empty
                if raw[key] is None and draft[key]:
                    given[key], compressed_used = [str(x) for x in draft[key]][:MAX_LIST_ITEMS], True
        result_extra = {"auto_compress": True, "compressed_used": compressed_used}
        if error:
            result_extra["auto_compress_error"] = error
    summary = scrubber.scrub_text(summary).strip()
    given = {k: [i for i in (scrubber.scrub_text(x).strip() for x in v) if i] for k, v in given.items()}
    ended_at = now_iso()
    summary_id = new_uuid4().replace("-", "")
    record = None
    who = _who(
        store, project, session_id, settings, agent=store.session_agent(project.id, session_id) or agent
    )
    if summary:  # an empty summary is stored as such, never as a placeholder
        source_ids = [event_id for event_id, _ in store.session_events(project.id, session_id)] or [
            new_ulid()
        ]
        record = MemoryRecord(
            record_id="mr_" + new_ulid(),
            project_id=project.id,
            project_root=project.root,
            session_id=session_id,
            title=(f"Session end: {' '.join(summary.split())}")[:TITLE_MAX],
            summary=_session_record_text(summary, **given),
            facts=clip_list(given["pitfalls"], FACT_MAX, FACTS_COUNT_MAX),
            concepts=[],
            files_touched=[],
            observation_type="session_summary",
            strategy=SESSION_END_STRATEGY,
            source_event_ids=source_ids,
            created_at=now_iso(),
            **who,
        )
    store.add_session_summary(
        {
            "id": summary_id,
            "session_id": session_id,
            "project": label,
            "project_id": project.id,
            "project_root": project.root,
            "branch": git_branch(project.root),
            "summary": summary,
            **given,
            "auto_compress": int(auto_compress),
            "compressed_used": int(compressed_used),
            "auto_compress_error": result_extra.get("auto_compress_error"),
            "record_id": record.record_id if record is not None else None,
            "ended_at": ended_at,
            **who,
        },
        record.model_dump(mode="json") if record is not None else None,
    )
    return {
        "id": summary_id,
        "session_id": session_id,
        "project": label,
        # stored to the ms; the seed shows whole seconds
        "ended_at": isotime.to_seconds(ended_at),
        "summary_len": len(summary),
        "next_steps_count": len(given["next_steps"]),
        **result_extra,
    }


def session_init(store: Store, project: Project, label: str = "general") -> dict:
    """What this session resumes from: the newest session_end row, as saved (kirolearn.recall.continuity).

    One row, never fields of two; when its summary is empty, `previous` is the newest row with one.
    Not consumed: it stays until a later session_end supersedes it. A label this
    project never used is `found: false`, with the labels it did use.
    """
    from kirolearn.recall import continuity

    label = Scrubber().scrub_text((_text("project", label, required=False) or "general").strip() or "general")
    found = continuity.resume(store.recall_connection(), project.id, label)
    if found:
        for row in filter(None, (found, found.get("previous"))):
            row.pop("project_id", None)
            row["auto_compress"] = bool(row["auto_compress"])
            row["compressed_used"] = bool(row["compressed_used"])
            # stored to the ms; the seed's shape
            row["ended_at"] = isotime.to_seconds(row.get("ended_at"))
        if found.get("previous") is None:
            found.pop("previous", None)
        for later in found.get("ended_without_summary") or []:
            later["ended_at"] = isotime.to_seconds(later.get("ended_at"))
        return {"found": True, **found}
    known = continuity.labels(store.recall_connection(), project.id)
    if known:
        message = (
            f"No session summary under the label '{label}' in this project yet; "
            f"labels used here: {', '.join(known)}."
        )
    else:
        message = "No earlier session summary for this project: this is a fresh start."
    return {"found": False, "project": label, "known_projects": known, "message": message}
