"""The MCP server's tools on the official SDK (mcp 1.x FastMCP); `kirolearn-mcp` (the package's
`main`) answers a client's start-up without it and hands over here at the first tool call.

Every tool validates its input and answers errors as MCP error results; the server itself never
dies on bad input.
"""

import contextlib
import inspect
import json
import logging
import os
import sys
from typing import Annotated, Literal

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, StrictBool

from kirolearn import __version__
from kirolearn.core import marks, paths
from kirolearn.core.observation_types import HAND_MADE_TYPES, OBSERVATION_TYPES
from kirolearn.pipeline import summaries
from kirolearn.recall import context
from kirolearn.recall.lexical import SEARCH_LIMIT_MAX
from kirolearn.store import backends
from kirolearn.store.record import (
    CONCEPT_MAX,
    CONCEPTS_COUNT_MAX,
    FACT_MAX,
    FACTS_COUNT_MAX,
    FILE_MAX,
    FILES_KEPT,
    FORGET_REASON_MAX,
    RECORD_ID_PATTERN,
    SUMMARY_MAX,
    TITLE_MAX,
)

log = logging.getLogger("kirolearn.mcp")

# The seed's session_end description, byte for byte (seeds/session_end.md).
SESSION_END_DESCRIPTION = (
    "End-of-session capture: summary + highlights + pitfalls + next_steps so the next session can resume cleanly. "
    "Set auto_compress=true to have the LLM generate the missing summary/next_steps/pitfalls from stored session "
    "artifacts (or from an optional `transcript`)."
)
MAX_TEXT = summaries.MAX_FIELD_CHARS
MAX_ITEMS = summaries.MAX_LIST_ITEMS
_JSON_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
    "NoneType": "null",
}

INSTRUCTIONS = (
    "kirolearn is this project's memory. Call session_init at the start of a session to resume where the last "
    "one ended; search_memory before re-investigating something; get_memory to read in full a record the "
    "context block lists in one line (by its id); save_session_summary at the end of a "
    "substantive turn; session_end before you finish a session."
)


class SavedRecord(BaseModel):
    """A record the tool stored."""

    record_id: str
    title: str
    message: str


class SessionEndResult(BaseModel):
    """What session_end returns (the seed's result shape)."""

    id: str
    session_id: str
    project: str
    ended_at: str
    summary_len: int
    next_steps_count: int
    auto_compress: bool | None = None
    compressed_used: bool | None = None
    auto_compress_error: str | None = None


class SessionInitResult(BaseModel):
    """The latest session_end summary of a project, or found=false."""

    found: bool
    project: str
    message: str | None = None
    id: str | None = None
    session_id: str | None = None
    project_root: str | None = None
    branch: str | None = None
    summary: str | None = None
    highlights: list[str] = Field(default_factory=list)
    pitfalls: list[str] = Field(default_factory=list)
    next_steps: list[str] = Field(default_factory=list)
    open_questions: list[str] = Field(default_factory=list)
    auto_compress: bool | None = None
    compressed_used: bool | None = None
    auto_compress_error: str | None = None
    record_id: str | None = None
    ended_at: str | None = None
    ended_without_summary: list[dict] = Field(default_factory=list)
    # the newest row with a summary, whole, when this one has none
    previous: dict | None = None
    known_projects: list[str] = Field(default_factory=list)


class Memory(BaseModel):
    """One search hit."""

    record_id: str
    title: str
    summary: str
    observation_type: str
    concepts: list[str]
    files_touched: list[str]
    created_at: str
    score: float
    # current|changed|deleted; failed|succeeded|unknown (docs/memory-marks.md)
    freshness: str = "current"
    outcome: str = "unknown"
    # a newer record changed what this one stated
    superseded_by: str | None = None
    merged_into: str | None = None


class MemoryDetails(BaseModel):
    """get_memory's answer: one record in full."""

    record_id: str
    title: str
    summary: str
    observation_type: str
    strategy: str
    facts: list[str]
    concepts: list[str]
    files_touched: list[str]
    created_at: str
    session_id: str
    actor: str | None = None
    # marks (docs/memory-marks.md), values as in MemoryHit
    freshness: str = "current"
    outcome: str = "unknown"
    superseded_by: str | None = None
    merged_into: str | None = None
    supersedes: list[str] = []
    merged_from: list[str] = []


class ForgetResult(BaseModel):
    """forget_memory's answer."""

    record_id: str
    forgotten: bool
    title: str | None = None
    message: str


class SearchResult(BaseModel):
    """search_memory's structured answer."""

    results: list[Memory]


def _result(text: str, structured: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structuredContent=structured.model_dump(exclude_none=True),
    )


def describe_invalid(tool: str, error) -> str:
    """A pydantic ValidationError of a tool's arguments as one plain line (no pydantic text, no links)."""
    parts = []
    for err in error.errors(include_url=False)[:3]:
        loc = err.get("loc") or ()
        name = str(loc[0]) if loc else "arguments"
        name += "".join(f"[{p}]" for p in loc[1:])
        kind = err.get("type", "")
        ctx = {
            k: (f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else v)
            for k, v in (err.get("ctx") or {}).items()
        }
        got = _JSON_TYPES.get(type(err.get("input")).__name__, type(err.get("input")).__name__)
        expected = {
            "string_type": "a string",
            "list_type": "a list",
            "int_type": "an integer",
            "int_parsing": "an integer",
            "int_from_float": "an integer",
            "bool_type": "true or false",
            "bool_parsing": "true or false",
            "float_type": "a number",
            "float_parsing": "a number",
            "dict_type": "an object",
            "model_type": "an object",
        }.get(kind)
        if kind == "missing":
            parts.append(f"'{name}' is required")
        elif expected:
            parts.append(f"'{name}' must be {expected}, got {got}")
        elif kind == "string_too_long":
            parts.append(f"'{name}' must be at most {ctx.get('max_length')} characters")
        elif kind == "string_too_short":
            parts.append(f"'{name}' must be at least {ctx.get('min_length')} character(s)")
        elif kind == "too_long":
            parts.append(f"'{name}' must have at most {ctx.get('max_length')} items")
        elif kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
            bound = next(iter(ctx.values()), "")
            word = {
                "greater_than_equal": "at least",
                "less_than_equal": "at most",
                "greater_than": "more than",
                "less_than": "less than",
            }[kind]
            parts.append(f"'{name}' must be {word} {bound}")
        elif kind == "literal_error":
            parts.append(f"'{name}' must be one of {ctx.get('expected', '')}")
        else:
            parts.append(f"'{name}': {err.get('msg', 'invalid value')}")
    more = len(error.errors()) - len(parts)
    return f"invalid arguments for {tool}: " + "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


class ScrubbingFastMCP(FastMCP):
    """FastMCP whose tool errors are scrubbed: a validation error quotes the rejected input."""

    async def call_tool(self, name, arguments):
        from mcp.server.fastmcp.exceptions import ToolError
        from pydantic import ValidationError

        from kirolearn.core.errors import KirolearnError, one_line
        from kirolearn.privacy.sanitize import clean_text
        from kirolearn.privacy.scrub import scrub_text

        # an error can quote memory or input: sanitised like any answer
        def error(text: str) -> ToolError:
            return ToolError(scrub_text(clean_text(text)))

        try:
            result = await super().call_tool(name, arguments)
        except ToolError as exc:
            cause = exc.__cause__ or exc.__context__
            # FastMCP wraps what a tool raised
            if isinstance(cause, KirolearnError):
                raise error(str(cause)) from None
            # wrong argument types or sizes
            if isinstance(cause, ValidationError):
                raise error(describe_invalid(name, cause)) from None
            raise error(one_line(str(exc))) from None
        except KirolearnError as exc:
            raise error(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - becomes the MCP error result
            log.error("tool %s failed: %s", name, scrub_text(one_line(f"{type(exc).__name__}: {exc}")))
            raise error(one_line(str(exc))) from None
        return sanitise_result(result)

    async def run_stdio_async(self) -> None:
        """Serve over stdio, answering a malformed request with a JSON-RPC error that carries its id."""
        async with guarded_stdio() as (read_stream, write_stream):
            await self._mcp_server.run(
                read_stream, write_stream, self._mcp_server.create_initialization_options()
            )


def sanitise_text(text: str, scrubber) -> str:
    """One text answer on its way to the agent (architecture.md rule 9): a JSON text is re-encoded from its
    sanitised value (it stays JSON); any other text is cleaned, re-scrubbed and marker-like lines quoted."""
    from kirolearn.privacy.sanitize import outbound_text, outbound_value

    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            value = json.loads(text)
        except ValueError:
            pass
        else:
            # the layout it came in
            indent = 2 if stripped.startswith(("{\n", "[\n")) else None
            return json.dumps(outbound_value(value, scrubber), ensure_ascii=text.isascii(), indent=indent)
    return outbound_text(text, scrubber)


def sanitise_result(result):
    """Every answer of every tool, whatever form FastMCP returns it in, sanitised (text and structured)."""
    from kirolearn.manage.records import (
        # the user's extra patterns and allow-list, cached
        scrubber as configured,
    )
    from kirolearn.privacy.sanitize import outbound_value

    scrub = configured()

    def content(items):
        out = []
        for item in items:
            if isinstance(item, TextContent):
                item = item.model_copy(update={"text": sanitise_text(item.text, scrub)})
            out.append(item)
        return out

    if isinstance(result, CallToolResult):
        update = {"content": content(result.content)}
        if result.structuredContent is not None:
            update["structuredContent"] = outbound_value(result.structuredContent, scrub)
        return result.model_copy(update=update)
    if isinstance(result, dict):
        return outbound_value(result, scrub)
    if isinstance(result, tuple) and len(result) == 2:
        return content(result[0]), outbound_value(result[1], scrub)
    if isinstance(result, (list, tuple)):
        return content(result)
    return result


def _too_deep(exc: Exception) -> bool:
    """Whether pydantic refused a line for its nesting (its JSON parser stops at 200 levels)."""
    errors = getattr(exc, "errors", None)
    try:
        first = errors()[0] if callable(errors) else {}
    except Exception:  # noqa: BLE001 - not a ValidationError after all
        return False
    return first.get("type") == "json_invalid" and "recursion limit" in str(first.get("msg", ""))


def _shallow_id(line: str):
    """The top-level "id" of a JSON object nested too deeply to parse, read without descending
    into the nesting (None when there is none to read)."""
    depth, i, n = 0, 0, len(line)
    while i < n:
        ch = line[i]
        if ch == '"':
            end = i + 1
            while end < n and line[end] != '"':
                end += 2 if line[end] == "\\" else 1
            key, i = line[i : end + 1], end + 1
            if depth != 1:
                continue
            j = i
            while j < n and line[j] in " \t\r\n":
                j += 1
            if j < n and line[j] == ":" and key == '"id"':
                value = line[j + 1 :].lstrip(" \t\r\n")
                stop = next((k for k, c in enumerate(value) if c in ",}"), len(value))
                try:
                    found = json.loads(value[:stop])
                except ValueError:
                    return None
                return found if isinstance(found, (str, int)) and not isinstance(found, bool) else None
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        i += 1
    return None


def malformed_reply(line: str, too_deep: bool = False):
    """The JSON-RPC error for a line that is not a valid JSON-RPC message, or None when none is owed.

    A request whose id can be read gets -32602 (its params are not an object) or -32600
    (anything else wrong with it), so the client does not wait for its own timeout; one nested
    deeper than the parser goes (`too_deep`) gets -32700, its id read without parsing it. A line that
    is not JSON, has no usable id or is a response gets none (JSON-RPC answers responses with
    nothing). The error quotes nothing of the line: it may hold a secret.
    """
    from mcp.types import ErrorData, JSONRPCError, JSONRPCMessage

    try:
        message = json.loads(line)
    except RecursionError:
        message, too_deep = {"id": _shallow_id(line)}, True
    except ValueError:
        return None
    if too_deep:
        request_id = message.get("id") if isinstance(message, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            return None
        text = "Parse error: the message is nested more than 200 levels deep; send it flatter"
        return JSONRPCMessage(
            JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=-32700, message=text))
        )
    if not isinstance(message, dict) or "result" in message or "error" in message:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return None
    params_bad = message.get("params") is not None and not isinstance(
        message["params"], dict
    )  # MCP: objects only
    method_ok = isinstance(message.get("method"), str) and message.get("jsonrpc") == "2.0"
    code, text = (
        (-32602, "Invalid params: 'params' must be an object")
        if params_bad and method_ok
        else (
            -32600,
            'Invalid Request: not a JSON-RPC 2.0 request (needs "jsonrpc": "2.0", an id and '
            'a string "method")',
        )
    )
    return JSONRPCMessage(
        JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=text))
    )


@contextlib.asynccontextmanager
async def guarded_stdio(replay=(), answered=None):
    """The SDK's stdio transport (mcp.server.stdio), except for a line that is not a valid message.

    The SDK hands such a line on as an exception: the server logs it (with the end of the line in
    pydantic's message) and answers nothing, so the client waits out its own timeout. Here it is
    answered at once (malformed_reply) and logged by its size only.

    `replay`: lines the client sent before this server ran (the package's start-up front answered
    them), read before stdin; `answered`: (id, result) of the `initialize` the front answered, whose
    repeated answer is not sent again.
    """
    from io import TextIOWrapper

    import anyio
    from mcp import types
    from mcp.shared.message import SessionMessage

    stdin = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
    read_writer, read_stream = anyio.create_memory_object_stream(0)
    write_stream, write_reader = anyio.create_memory_object_stream(0)
    # the session closes its own copy when it ends
    replies = write_stream.clone()

    async def lines():
        for raw in replay:
            yield raw.decode("utf-8", errors="replace")
        async for line in stdin:
            yield line

    async def stdin_reader():
        try:
            async with read_writer, replies:
                async for line in lines():
                    if not line.strip():
                        continue
                    try:
                        message = types.JSONRPCMessage.model_validate_json(line)
                    except Exception as exc:  # noqa: BLE001
                        # pydantic's error quotes the line: never logged
                        reply = malformed_reply(line, _too_deep(exc))
                        log.warning(
                            "malformed MCP message (%d bytes) %s",
                            len(line),
                            f"answered with JSON-RPC error {reply.root.error.code}"
                            if reply
                            else "ignored (no request id to answer)",
                        )
                        if reply is not None:
                            await replies.send(SessionMessage(reply))
                        continue
                    await read_writer.send(SessionMessage(message))
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    async def stdout_writer():
        try:
            async with write_reader:
                pending = answered
                async for session_message in write_reader:
                    root = session_message.message.root
                    if (
                        pending is not None
                        and isinstance(root, types.JSONRPCResponse)
                        and root.id == pending[0]
                    ):
                        ours = pending[1]
                        pending = None
                        sdk = root.result
                        if (
                            sdk != ours
                            # stale listing.json: scripts/mcp_listing.py
                        ):
                            log.warning(
                                "the start-up answer to initialize differed from the SDK's: %s",
                                json.dumps(sdk)[:500],
                            )
                        continue  # the client has its answer already
                    await stdout.write(
                        session_message.message.model_dump_json(by_alias=True, exclude_none=True) + "\n"
                    )
                    await stdout.flush()
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdin_reader)
        tg.start_soon(stdout_writer)
        yield read_stream, write_stream


# clientInfo name -> the agent name our hooks use (the capture adapters' NAMEs)
CLIENT_AGENTS = (
    ("claude", "claude-code"),
    ("codex", "codex"),
    ("copilot", "copilot"),
    ("gemini", "gemini"),
    ("qwen", "qwen-code"),
    ("augment", "auggie"),
    ("kilo", "kilo-code"),
    ("factory", "factory-droid"),
    ("opencode", "opencode"),
    ("cursor", "cursor"),
    ("kiro", "kiro"),
)
AGENT_ENV = "KIROLEARN_AGENT"  # a server entry's env may name its agent

SESSION_ENVS = ("KIROLEARN_SESSION_ID", "KIRO_SESSION_ID")  # set by the agent


def agent_of_client(client_name: "str | None", environ=os.environ) -> "str | None":
    """The agent calling: $KIROLEARN_AGENT when it names a known agent, else the client's own name
    (clientInfo: `claude-code`, `codex-mcp-client`, ...), else None (attribution's default)."""
    known = {agent for _, agent in CLIENT_AGENTS}
    named = (environ.get(AGENT_ENV) or "").strip().lower()
    if named in known:
        return named
    lowered = (client_name or "").lower()
    return next((agent for word, agent in CLIENT_AGENTS if word in lowered), None)


def session_of_caller(environ=os.environ) -> "str | None":
    """The calling agent's session id when its environment names one (else the records' session is `mcp`)."""
    return next(
        (environ[name].strip()[:256] for name in SESSION_ENVS if (environ.get(name) or "").strip()), None
    )


def build_server(project_root: str, *, settings=None, complete=None, where: "str | None" = None) -> FastMCP:
    """The FastMCP server bound to one project (tests call this directly); `where` names it in messages."""
    # Tools take a `project` label; the resolved one is `here`.
    here = summaries.Project(project_root)
    where = where or f"project {project_root}"
    mcp = ScrubbingFastMCP("kirolearn", instructions=INSTRUCTIONS)
    # serverInfo.version: ours, not the MCP SDK's
    mcp._mcp_server.version = __version__

    def tool(annotations, description: "str | None" = None):
        """Register a tool whose description is its docstring without the source indentation."""

        def register(fn):
            text = description if description is not None else inspect.cleandoc(fn.__doc__ or "")
            return mcp.tool(annotations=annotations, description=text)(fn)

        return register

    # the MCP tools are the facade's calls, over MCP
    from kirolearn.memory import Memory as Facade

    memory = Facade(settings=settings)

    def caller() -> "tuple[str | None, str | None]":
        """(agent, session id) of the client calling now (its initialize named it)."""
        try:
            params = mcp._mcp_server.request_context.session.client_params
        except (LookupError, AttributeError):  # outside a request
            params = None
        return agent_of_client(params.clientInfo.name if params is not None else None), session_of_caller()

    write = ToolAnnotations(
        readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False
    )
    read = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)

    @tool(write)
    def save_session_summary(
        request: Annotated[str, Field(max_length=MAX_TEXT, description="What the user asked for")],
        investigated: Annotated[str, Field(max_length=MAX_TEXT, description="What the agent explored")],
        learned: Annotated[str, Field(max_length=MAX_TEXT, description="Key findings or discoveries")],
        completed: Annotated[str, Field(max_length=MAX_TEXT, description="What was delivered")],
        next_steps: Annotated[str, Field(max_length=MAX_TEXT, description="Suggested follow-ups")],
        files_read: Annotated[
            list[str], Field(max_length=MAX_ITEMS, description="Files read during the turn")
        ],
        files_modified: Annotated[
            list[str], Field(max_length=MAX_ITEMS, description="Files modified during the turn")
        ],
    ) -> Annotated[CallToolResult, SavedRecord]:
        """Save a structured summary of this turn as a memory record (no LLM involved).

        Use it at the end of a substantive turn: the record is searchable and shown to later sessions.
        """
        agent, session = caller()
        record = memory.save_turn_summary(
            project=here.root,
            agent=agent,
            session_id=session,
            request=request,
            investigated=investigated,
            learned=learned,
            completed=completed,
            next_steps=next_steps,
            files_read=files_read,
            files_modified=files_modified,
        )
        message = f"Saved turn summary {record.record_id}"
        return _result(message, SavedRecord(record_id=record.record_id, title=record.title, message=message))

    @tool(write, description=SESSION_END_DESCRIPTION)
    def session_end(
        session_id: Annotated[str, Field(min_length=1, max_length=256, description="This session's id")],
        summary: Annotated[
            str | None, Field(max_length=MAX_TEXT, description="What was done; required unless auto_compress")
        ] = None,
        highlights: Annotated[list[str] | None, Field(max_length=MAX_ITEMS)] = None,
        pitfalls: Annotated[
            list[str] | None, Field(max_length=MAX_ITEMS, description="Gotchas the next session must know")
        ] = None,
        next_steps: Annotated[list[str] | None, Field(max_length=MAX_ITEMS)] = None,
        open_questions: Annotated[list[str] | None, Field(max_length=MAX_ITEMS)] = None,
        project: Annotated[str, Field(max_length=200, description="Project label")] = "general",
        # StrictBool: "yes" or 1 are errors, not coerced (the seed says boolean)
        auto_compress: Annotated[
            StrictBool, Field(description="Let the configured LLM draft what is missing")
        ] = False,
        transcript: Annotated[
            str | None,
            Field(
                max_length=MAX_TEXT,
                description="Session log for auto_compress; a blank one "
                "falls back to the session's stored events",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, SessionEndResult]:
        # description: SESSION_END_DESCRIPTION, the seed's text byte for byte
        result = memory.end_session(
            session_id,
            project=here.root,
            summary=summary,
            highlights=highlights,
            pitfalls=pitfalls,
            next_steps=next_steps,
            open_questions=open_questions,
            label=project,
            auto_compress=auto_compress,
            transcript=transcript,
            complete=complete,
            agent=caller()[0],
        )
        return _result(json.dumps(result), SessionEndResult(**result))

    @tool(read)
    def session_init(
        project: Annotated[
            str, Field(max_length=200, description="Project label used at session_end")
        ] = "general",
    ) -> Annotated[CallToolResult, SessionInitResult]:
        """Return the latest session_end summary of this project so this session resumes cleanly.

        Not consumed: its next steps and open questions stay until a later session_end supersedes them.
        """
        found = memory.init_session(label=project, project=here.root)
        return _result(json.dumps(found, ensure_ascii=False), SessionInitResult(**found))

    @tool(read)
    def search_memory(
        query: Annotated[str, Field(min_length=1, max_length=1000, description="What to look for")],
        limit: Annotated[
            int, Field(ge=1, le=SEARCH_LIMIT_MAX, description=f"Most results (1-{SEARCH_LIMIT_MAX})")
        ] = 10,
        observation_type: Annotated[
            Literal[OBSERVATION_TYPES] | None, Field(description="Only records of this type")
        ] = None,
        since: Annotated[
            str | None,
            Field(
                max_length=40,
                pattern=r"^\s*(\d{1,6}\s*[smhdwSMHDW]|\d{4}-\d{2}-\d{2}([T ][0-9:.]+)?(Z|[+-]\d{2}:?\d{2})?)\s*$",
                description="Only records since an age (7d, 12h, 30m, 2w) or an ISO date (2026-11-01)",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Search this project's memory records (titles, summaries, facts, concepts, files).

        Each result carries its record id and date; pass the id to forget_memory to retract a wrong memory.
        """
        from kirolearn.manage.records import parse_since

        hits = memory.search(
            query,
            project=here.root,
            limit=limit,
            types=[observation_type] if observation_type else None,
            since=parse_since(since),
        )
        if not hits:
            return _result(f"No matching memories found in {where}.", SearchResult(results=[]))
        from kirolearn.privacy.sanitize import one_line, quote

        blocks = []
        for h in hits:  # untrusted: one-line fields, summary quoted (rule 9)
            flags = "".join(f", {label}" for label in marks.labels(h.freshness, h.outcome))
            mark = f", superseded by {h.superseded_by}" if h.superseded_by else ""
            block = (
                f"### {one_line(h.title)}\n({h.record_id}, {context.kind_label(h)}{flags}, {h.created_at[:10]}{mark})\n\n"
                f"{quote(h.summary.split(chr(10)))}"
            )
            if h.concepts:
                block += "\nConcepts: " + ", ".join(one_line(c) for c in h.concepts)
            if h.files_touched:
                block += "\nFiles:\n" + "\n".join(f"  {one_line(f)}" for f in h.files_touched)
            blocks.append(block)
        text = context.scrub_out("\n\n".join(blocks), context.settings())
        from kirolearn.manage.records import (
            clean,  # structured results are re-scrubbed like the text
        )

        results = [
            Memory(
                record_id=h["record_id"],
                title=h["title"],
                summary=h["summary"],
                observation_type=h["observation_type"],
                concepts=[str(c) for c in h["concepts"]],
                files_touched=[str(f) for f in h["files_touched"]],
                created_at=h["created_at"],
                score=round(h["score"], 4),
                freshness=h.get("freshness") or "current",
                outcome=h.get("outcome") or "unknown",
                superseded_by=h.get("superseded_by"),
                merged_into=h.get("merged_into"),
            )
            for h in clean([h.to_dict() for h in hits])
        ]
        return _result(text, SearchResult(results=results))

    @tool(read)
    def get_memory(
        record_id: Annotated[
            str,
            Field(
                pattern=RECORD_ID_PATTERN,
                description="A record id from the context block or search_memory (mr_...)",
            ),
        ],
    ) -> Annotated[CallToolResult, MemoryDetails]:
        """Read one memory record of this project in full: its summary, facts, files and concepts.

        The context block shows one line per record with its id; call this when a line looks relevant.
        """
        from kirolearn.manage import records as manage

        store = backends.open_existing()
        found = None
        if store is not None:
            with store:
                found = store.get_record(record_id)
                if found is not None:
                    # the chain both ways
                    found.update(store.marked_by(record_id))
        if found is None or found["project_id"] != here.id:
            from mcp.server.fastmcp.exceptions import ToolError

            raise ToolError(
                f"no record {record_id} in {where}: it may have been forgotten; "
                "search_memory finds the live ones"
            )
        found = manage.clean(found)
        details = MemoryDetails(**{k: found.get(k) for k in MemoryDetails.model_fields if k in found})
        from kirolearn.privacy.sanitize import one_line

        lines = [
            # a title with line breaks must not end the heading
            f"### {one_line(found['title'])}",
            f"({record_id}, {context.kind_label(details)}"
            + "".join(f", {label}" for label in marks.labels(details.freshness, details.outcome))
            + f", {found['created_at'][:10]})",
            "",
            found["summary"],
        ]
        if details.facts:
            lines += ["", "Facts:"] + [f"- {f}" for f in details.facts]
        if details.files_touched:
            lines += ["", "Files: " + ", ".join(details.files_touched)]
        if details.concepts:
            lines += ["Concepts: " + ", ".join(details.concepts)]
        if details.superseded_by:
            lines += [
                "",
                f"Superseded by {details.superseded_by}: a newer record changed what this one states.",
            ]
        if details.merged_into:
            lines += ["", f"Merged into {details.merged_into}."]
        if details.supersedes:
            lines += ["", "Supersedes " + ", ".join(details.supersedes) + "."]
        if details.merged_from:
            lines += ["", "Merged from " + ", ".join(details.merged_from) + "."]
        return _result(context.scrub_out("\n".join(lines), context.settings()), details)

    @tool(ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False))
    def forget_memory(
        record_id: Annotated[
            str, Field(pattern=RECORD_ID_PATTERN, description="The record id search_memory returned")
        ],
        reason: Annotated[
            str,
            Field(
                min_length=1,
                max_length=FORGET_REASON_MAX,
                description="Why it is wrong or obsolete (kept in the audit trail the user sees)",
            ),
        ],
    ) -> Annotated[CallToolResult, ForgetResult]:
        """Retract a memory of this project that you know is wrong or obsolete: it leaves recall at once.

        A soft forget: the user can undo it (`kirolearn restore ID`) until it is purged. Forgetting twice is harmless.
        """
        from kirolearn.manage import records as manage

        with backends.open_store() as store:
            forgotten = manage.forget(
                [record_id], reason=reason, actor="mcp", project_root=here.root, store=store
            )
        if forgotten:
            title = forgotten[0]["title"]
            message = (
                f"Forgot {record_id} ({title}); the user can undo it with `kirolearn restore {record_id}`"
            )
        else:
            title, message = None, f"{record_id} was already forgotten"
        return _result(
            context.scrub_out(message, context.settings()),
            ForgetResult(record_id=record_id, forgotten=True, title=title, message=message),
        )

    @tool(write)
    def save_observation(
        title: Annotated[str, Field(min_length=1, max_length=TITLE_MAX, description="One line")],
        summary: Annotated[
            str, Field(min_length=1, max_length=SUMMARY_MAX, description="What happened and why it matters")
        ],
        observation_type: Literal[HAND_MADE_TYPES],
        facts: Annotated[
            list[Annotated[str, Field(max_length=FACT_MAX)]],
            Field(max_length=FACTS_COUNT_MAX, description="Durable facts"),
        ],
        concepts: Annotated[
            list[Annotated[str, Field(max_length=CONCEPT_MAX)]],
            Field(max_length=CONCEPTS_COUNT_MAX, description="Topics"),
        ],
        files_touched: Annotated[
            list[Annotated[str, Field(max_length=FILE_MAX)]],
            Field(max_length=FILES_KEPT, description="Paths"),
        ],
    ) -> Annotated[CallToolResult, SavedRecord]:
        """Save one observation (a decision, error, discovery, pattern or tool use) to this project's memory."""
        agent, session = caller()
        record = memory.save_observation(
            project=here.root,
            agent=agent,
            session_id=session,
            title=title,
            summary=summary,
            observation_type=observation_type,
            facts=facts,
            concepts=concepts,
            files_touched=files_touched,
        )
        message = f"Saved observation {record.record_id}"
        return _result(message, SavedRecord(record_id=record.record_id, title=record.title, message=message))

    return mcp


def setup_logging() -> None:
    handlers: list = [logging.StreamHandler(sys.stderr)]
    try:
        handlers.append(logging.StreamHandler(os.fdopen(paths.open_log("mcp.log"), "a", encoding="utf-8")))
    except (OSError, paths.HomeNotFound):
        pass
    from kirolearn.privacy.logscrub import use_scrubbing

    # no secret in a log line
    use_scrubbing(handlers, "%(asctime)s kirolearn-mcp %(levelname)s %(message)s")
    logging.basicConfig(level=logging.WARNING, handlers=handlers)


def serve_stdio(root: str, where: str, *, replay=(), answered=None) -> None:
    """Serve the project over stdio until the client hangs up, first reading `replay` (see guarded_stdio)."""
    import anyio

    server = build_server(root, where=where)
    log.info("serving %s", where)

    async def run():
        async with guarded_stdio(replay, answered) as (read_stream, write_stream):
            lowlevel = server._mcp_server
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    anyio.run(run)


async def listing_of(server) -> dict:
    """What the package's front answers at start-up (listing.json), from the SDK server itself."""
    from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS
    from mcp.types import LATEST_PROTOCOL_VERSION

    lowlevel = server._mcp_server
    options = lowlevel.create_initialization_options()
    tools = await server.list_tools()
    return {
        "server_name": options.server_name,
        "instructions": options.instructions,
        "capabilities": options.capabilities.model_dump(by_alias=True, exclude_none=True, mode="json"),
        "protocol_versions": list(SUPPORTED_PROTOCOL_VERSIONS),
        "latest_protocol": LATEST_PROTOCOL_VERSION,
        "tools": [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools],
    }
