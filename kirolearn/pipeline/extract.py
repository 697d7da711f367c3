"""Turn a batch of buffered events into memory-record candidates.

Two extractors share one output shape (dicts of MemoryRecord fields minus the
ids and timestamps the drainer adds):
- `deterministic(batch)`: no model, no network; one record per turn (request,
  commands, files read and changed, errors and their fixes, closing summary).
- `llm_extract(batch, settings, complete)`: renders the batch (each event's kind
  shown, large fields cut), asks the model for JSON matching `Extraction`,
  validates it with pydantic. `complete` is the seam tests and litellm plug into.
Neither writes anything; the drainer decides what is stored.
"""

import json
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field

from pydantic import ValidationError

from kirolearn.capture.events import cut_text

# re-exported for callers
from kirolearn.core.errors import ExtractionError  # noqa: F401
from kirolearn.core.mcp_tools import is_memory_tool
from kirolearn.pipeline import structured
from kirolearn.pipeline.prompt import PROMPT_VERSION, SUMMARY_REQUEST, SYSTEM_PROMPT, Candidate, Extraction  # noqa: F401
from kirolearn.store.record import (
    CONCEPT_MAX,
    CONCEPTS_COUNT_MAX,
    FACT_MAX,
    FACTS_COUNT_MAX,
    FILE_MAX,
    FILES_KEPT,
    SUMMARY_MAX,
    TITLE_MAX,
    clip,
    clip_list,
)

DETERMINISTIC_STRATEGY = "deterministic-turn"
LLM_STRATEGY = "llm-summary"


@dataclass
class Batch:
    """Buffered events of one project and session, oldest first."""

    project_id: str
    project_root: str
    session_id: str
    events: list
    reason: str  # turn-end | size | idle | flush

    @property
    def key(self) -> str:
        """Stable id of the batch across retries: its first event id."""
        return self.events[0]["event_id"]

    @property
    def event_ids(self) -> "list[str]":
        return [e["event_id"] for e in self.events]


@dataclass
class Completion:
    """What one model call returned."""

    content: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    finish_reason: str = ""  # "length": cut at max_answer_tokens
    form: str = ""  # one of structured.FORMS


# What events say

_COMMAND_TOOLS = (
    "execute_bash",
    "shell",
    "execute_pwsh",
    "bash",
    "run_command",
    "run_shell_command",
)  # Gemini CLI's
WRITE_TOOLS = (
    "fs_write",
    "write",
    "str_replace",
    "create",
    "edit",
    "append",
    "multiedit",
    "notebookedit",
    "write_file",
    "replace",
)  # Gemini CLI's
_EXIT_CODE = re.compile(r"Exit Code:\s*(-?\d+)", re.I)
# No leading \w* here: on a long run of word characters search() goes quadratic.
STRONG_ERROR = re.compile(r"(?:Error|Exception)\b|Traceback|FATAL|fatal:|[Dd]enied|[Nn]o such file|not found")
WEAK_ERROR = re.compile(r"error|fail", re.I)


def tool_base(name: str) -> str:
    return (name or "").rsplit("/", 1)[-1].lower()


def command_of(event: dict) -> "str | None":
    """The shell command a tool_use event ran, if any."""
    tool_input = event.get("tool_input")
    if not (isinstance(tool_input, dict) and isinstance(tool_input.get("command"), str)):
        return None
    # fs_write's "command" ("create", "str_replace") names an edit, not a shell.
    if tool_base(event.get("tool_name", "")) in _COMMAND_TOOLS or not paths_of(event):
        return tool_input["command"]
    return None


def paths_of(event: dict) -> "list[str]":
    tool_input = event.get("tool_input")
    paths = []
    if isinstance(tool_input, dict):
        for key in ("path", "file_path", "filePath", "target_file"):
            if isinstance(tool_input.get(key), str):
                paths.append(tool_input[key])
        for op in tool_input.get("operations") or ():
            if isinstance(op, dict) and isinstance(op.get("path"), str):
                paths.append(op["path"])
    return paths


def relative(path: str, root: str) -> str:
    if root and os.path.isabs(path):
        try:
            rel = os.path.relpath(path, root)
        except ValueError:
            return path
        if not rel.startswith(".."):
            return rel
    return path


def _response_text(event: dict) -> str:
    response = event.get("tool_response")
    if response is None:
        return ""
    if isinstance(response, str):
        return response
    if isinstance(response, dict):
        # stdout/stderr: Claude Code; output: Cursor; llmContent: Gemini
        parts = [
            str(response[k])
            for k in ("stdout", "stderr", "output", "llmContent", "textResultForLlm")
            if isinstance(response.get(k), str) and response[k]
        ]
        for key in ("result", "error"):
            value = response.get(key)
            items = value if isinstance(value, list) else [value]
            for item in items:
                if isinstance(item, dict):
                    # Gemini CLI's error {"message", "type"}
                    parts.extend(str(item.get(k, "")) for k in ("stdout", "stderr", "message") if item.get(k))
                elif item is not None:
                    parts.append(str(item))
        return "\n".join(parts)
    return json.dumps(response)


def response_text(event: dict) -> str:
    """A tool event's response as text (what a record's **Tool results:** line shows of it)."""
    return _response_text(event)


# Copilot CLI's
_FAILED_RESULT_TYPES = ("failure", "error", "denied", "rejected")

# Copilot's shell text ends "<shellId: 0 completed with exit code 1>"
_COMPLETED_EXIT = re.compile(r"completed with exit code\s*(-?\d+)", re.I)
# Factory Droid's Execute text ends "[Process exited with code N]"
_PROCESS_EXITED = re.compile(r"\[Process exited with code\s*(-?\d+)\]")
# Auggie's launch-process text opens "...<return-code>\nN\n</return-code>\n<output>"
_RETURN_CODE = re.compile(r"<return-code>\s*(-?\d+)\s*</return-code>")


def _last(pattern: re.Pattern, text: str) -> "re.Match | None":
    """The last match in a text's tail: an output's trailer wins over what it printed before."""
    matches = list(pattern.finditer(text[-2000:]))
    return matches[-1] if matches else None


def tool_status(event: dict) -> "bool | None":
    """How a tool call ended, read the way its agent reports it: False failed, True ended well with a
    definite status, None unknown. Each agent's own shape only (a text pattern of one agent's format
    never judges another's output), and a status line at the end wins over text earlier in it."""
    agent = event.get("agent") or "kiro"
    response = event.get("tool_response")
    if isinstance(response, dict):
        if response.get("success") is False or response.get("is_error") is True:
            # Kiro classic and IDE, PostToolUseFailure, any is_error
            return False
    if agent == "claude-code":
        if isinstance(response, dict) and response.get("interrupted"):
            return None
        return True  # PostToolUse fires only for a call that succeeded
    if agent == "copilot":
        text = _response_text(event)
        # "<shellId: 0 completed with exit code 1>"
        trailer = _last(_COMPLETED_EXIT, text)
        if trailer:
            return trailer.group(1) == "0"
        kind = str((response or {}).get("resultType", "")).lower() if isinstance(response, dict) else ""
        if kind in _FAILED_RESULT_TYPES:
            return False
        return True if kind == "success" else None
    if agent == "qwen-code":
        content = response.get("llmContent") if isinstance(response, dict) else None
        # run_shell_command's text ends "Exit Code: N"
        trailer = _last(_EXIT_CODE, content) if isinstance(content, str) else None
        if trailer:
            return trailer.group(1) == "0"
        return True if isinstance(response, dict) and "llmContent" in response else None
    if agent == "auggie":
        output = response.get("output") if isinstance(response, dict) else None
        if isinstance(response, dict) and response.get("error"):
            return False
        # the return code comes first, before the command's own output
        code = _RETURN_CODE.search(output[:400]) if isinstance(output, str) else None
        if code:
            return code.group(1) == "0"
        return True if isinstance(output, str) else None
    if agent == "gemini":
        if isinstance(response, dict):
            error = response.get("error")
            if (
                isinstance(error, dict)
                and (error.get("message") or error.get("type"))
                or isinstance(error, str)
            ):
                return False
            content = response.get("llmContent")
            # "Exit Code: N": a command that failed in a tool that ran
            trailer = _last(_EXIT_CODE, content) if isinstance(content, str) else None
            if trailer:
                return trailer.group(1) == "0"
            if "llmContent" in response:
                # AfterTool carries `error` when a tool failed, and only then
                return True
        return None
    if agent == "factory-droid":
        # PostToolUse fires only for a call that ran; a shell call's text ends with its exit code
        trailer = _last(_PROCESS_EXITED, response) if isinstance(response, str) else None
        if trailer:
            return trailer.group(1) == "0"
        return True if response is not None else None
    if agent == "kilo-code":
        meta = response.get("metadata") if isinstance(response, dict) else None
        # its bash tool's exit status
        code = meta.get("exit") if isinstance(meta, dict) else None
        if isinstance(code, int) and not isinstance(code, bool):
            return code == 0
        return None
    # Codex, Cursor, opencode
    if isinstance(response, dict) and "exit_code" in response:
        code = response["exit_code"]
        if code is None:  # Codex: the sandbox killed it
            text = _response_text(event)
            return False if STRONG_ERROR.search(text[-2000:]) or "Read-only file system" in text else None
        return str(code).strip() in ("0", "")
    if agent == "kiro":
        if isinstance(response, dict):
            items = response.get("result") if isinstance(response.get("result"), list) else []
            codes = [str(i.get("exit_status", "")) for i in items if isinstance(i, dict)]
            if any(c not in ("0", "") for c in codes):
                return False
            if response.get("success") is True or "0" in codes:
                return True
        # v3 and IDE 1.x: "Exit Code: N" at the end
        trailer = _last(_EXIT_CODE, _response_text(event))
        if trailer:
            return trailer.group(1) == "0"
        return None
    if isinstance(response, dict) and response.get("success") is True:
        return True
    return None


def failed(event: dict) -> bool:
    """Did this tool call fail (see tool_status for every shape)?"""
    return tool_status(event) is False


def _unnamed(event: dict) -> bool:
    """A call whose input did not reach the store: an empty `tool_input` (Kiro v3's PostToolUse) that no
    pre-tool twin filled in (paired_tools), e.g. a re-run's PreToolUse dropped as a content duplicate of
    the first run's (identical within the dedup window). It may have run anything, the failed command too."""
    return not event.get("tool_input") and event.get("trigger") != "preToolUse"


def _may_rerun(failed_call: dict, later: dict) -> bool:
    """Can `later` undo `failed_call`: the same command with the same arguments; for a write, a
    write of the same file; for another call, the same tool with the same input. Kiro v3 alone sends
    a re-run's PostToolUse without its input (its PreToolUse, identical to the first run's, is a
    content duplicate): there, the same tool with its input unknown may be the re-run."""
    command, again = command_of(failed_call), command_of(later)
    if command and again:
        return _same_command(command, again)
    if later.get("tool_name") != failed_call.get("tool_name"):
        return False
    if tool_base(failed_call.get("tool_name", "")) in WRITE_TOOLS and paths_of(failed_call):
        return bool(set(paths_of(failed_call)) & set(paths_of(later)))
    if (later.get("agent") or "kiro") == "kiro" and _unnamed(later) and not again:
        return True
    return not command and not again and failed_call.get("tool_input") == later.get("tool_input")


def resolved(tools: list, i: int) -> bool:
    """Did something later in the turn undo the failure of tools[i]: a call that may be its re-run
    (`_may_rerun`) and did not fail? So `failed` needs that nothing later in the turn that could be the
    same work succeeded; an unrelated later command does not undo a failure."""
    return any(_may_rerun(tools[i], later) and not failed(later) for later in tools[i + 1 :])


def turn_outcome(tools: list) -> str:
    """A turn's outcome from its tool calls, oldest first (kirolearn.core.marks): `failed` when a call
    failed and nothing later in the turn re-ran it with success; `succeeded` when some call ended
    well with a definite status (or a failure was fixed) and none stayed failed; else `unknown`."""
    statuses = [tool_status(t) for t in tools]
    if any(s is False and not resolved(tools, i) for i, s in enumerate(statuses)):
        return "failed"
    if any(s is not None for s in statuses):
        return "succeeded"
    return "unknown"


def error_line(event: dict) -> str:
    """The most telling line of a failed call's output (an error line near the end)."""
    lines = [ln.strip() for ln in _response_text(event).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not _EXIT_CODE.fullmatch(ln) and ln != "Output:"]
    for pattern in (STRONG_ERROR, WEAK_ERROR):
        for line in reversed(lines[-30:]):
            if pattern.search(line) and not line.startswith("Traceback"):
                return clip(line, 240)
    return clip(lines[-1], 240) if lines else "failed"


_SEGMENTS = re.compile(r"\s*(?:&&|\|\||;)\s*")


def _work(command: str) -> "tuple[tuple, tuple, frozenset, tuple]":
    """A command as (the steps before its last, its program, its flags, its other words): env
    assignments dropped, `python -m x` one program."""
    *before, last = _SEGMENTS.split(" ".join(command.split()).rstrip(";")) or [""]
    words = last.split()
    while words and "=" in words[0] and not words[0].startswith("-"):
        words.pop(0)
    program = words[:1]
    rest = words[1:]
    if program and program[0].startswith("python") and rest[:1] == ["-m"] and len(rest) > 1:
        program, rest = [*program, "-m", rest[1]], rest[2:]
    flags = frozenset(w for w in rest if w.startswith("-"))
    return tuple(before), tuple(program), flags, tuple(w for w in rest if not w.startswith("-"))


def _same_command(a: str, b: str) -> bool:
    """Does `b` redo `a`: the same command, or the same program with the same flags over targets that
    hold a's (`pytest tests/ -q` redoes `pytest tests/test_api.py -q`; `make clean` never redoes `make`,
    nor `cd repo && git status` redo `cd repo && pytest`)."""
    if " ".join(a.split()) == " ".join(b.split()):
        return True
    first, second = _work(a), _work(b)
    if first[:3] != second[:3] or not first[1]:
        return False
    if not first[3] or not second[3]:
        return first[3] == second[3]
    return all(any(t == s or t.startswith(s.rstrip("/") + "/") for s in second[3]) for t in first[3])


# Deterministic extractor

_STOPWORDS = frozenset(
    "the and for that this with from have what when where which will would should could your you "
    "are was were been into does there their then them they than also just like make made can't "
    "don't it's fix add can not but all any how why out use using used get got now yes way same "
    "file files test tests some more only other after before about returns keeps make makes uses "
    "prints find found want need please sure into it's them those these here there example "
    # words that say nothing of a topic ("lets", "through", "again", ...)
    "lets let's let through again because since while until unless though although however therefore "
    "thus also still even ever never always often maybe perhaps really very quite rather much many "
    "most less least each every both either neither such own over under above below between among "
    "within without across along around upon onto off down again once twice already yet soon later "
    "today tomorrow yesterday okay thanks thank hello done doing goes going gone came come comes "
    "took take takes taken gave give gives given tell told said says know knew think thought seems "
    "seem seemed look looks looked looking work works worked working thing things something anything "
    "everything nothing someone anyone everyone being having them's what's that's there's here's "
    "i'm you're we're they're isn't aren't wasn't weren't doesn't didn't won't wouldn't shouldn't "
    "couldn't haven't hasn't hadn't ours yours theirs mine whose whom who's which's able unable "
    "first second last next back right left well good great better best fine".split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_\-']{3,}")
# The scrubber's stand-in for a secret: its words are not the topic.
_REDACTION = re.compile(r"\[REDACTED:[A-Za-z0-9_\-]{1,64}\]")


def _concepts(texts) -> "list[str]":
    counts: Counter = Counter()
    for text in texts:
        for word in _WORD.findall(_REDACTION.sub(" ", text or "")):
            lower = word.lower().strip("-_'")
            if lower.endswith("'s"):
                lower = lower[:-2]
            if lower not in _STOPWORDS and len(lower) >= 4 and "'" not in lower:
                counts[lower] += 1
    return [w for w, _ in counts.most_common(6)]


# A turn without tools is about the project when it names a file or code.
_CODE_EXTENSIONS = frozenset(
    "py pyi js jsx ts tsx mjs cjs json toml yaml yml cfg ini md rst txt sh bash zsh ps1 sql html css scss "
    "rs go java kt kts c h cc cpp hpp cs rb php swift lock xml gradle mk proto graphql vue svelte env".split()
)
_FILE_TOKEN = re.compile(r"(?<![\w@])((?:[\w.-]+/)+[\w.-]+|[\w-]+(?:\.[\w-]+)*\.([A-Za-z0-9]{1,8}))(?![\w/])")


# code identifiers: snake_case, dotted.names, camelCase, --flags
_IDENTIFIER = re.compile(
    r"\b[A-Za-z]\w*_\w*[A-Za-z0-9]\b|\b[a-z]\w*\.[a-z_]\w*[a-z0-9_]\b|\b[a-z]+[A-Z]\w*\b|(?<!\S)--[a-z][\w-]+"
)


def names_project_content(*texts: str) -> bool:
    """Does this text name a file, a path or code (so a turn without tools still holds project knowledge)?"""
    for text in texts:
        text = _REDACTION.sub(" ", text or "")
        if "`" in text or _IDENTIFIER.search(text):
            return True
        for match in _FILE_TOKEN.finditer(text):
            whole, ext = match.group(1), match.group(2)
            if "/" in whole and not whole.startswith(("http:", "https:")) and any(c.isalpha() for c in whole):
                return True
            if ext and ext.lower() in _CODE_EXTENSIONS:
                return True
    return False


def split_turns(events: list) -> "list[list[dict]]":
    """Split a session's events into turns: each prompt starts one."""
    turns: list = []
    current: list = []
    for event in events:
        if event["kind"] == "prompt" and any(e["kind"] != "note" for e in current):
            turns.append(current)
            current = []
        current.append(event)
        if event["kind"] == "session_summary":
            turns.append(current)
            current = []
    if current:
        turns.append(current)
    return turns


def _sentences(text: str, limit: int) -> "list[str]":
    parts = re.split(r"(?<=[.!?])\s+", " ".join(text.split()))
    return [p for p in parts if len(p) > 3][:limit]


_PATH_IN_TEXT = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.[A-Za-z0-9]{1,6})\b")


def paired_tools(turn: list) -> "list[dict]":
    """Post-tool events, each given its pre-tool twin's input when Kiro sent it empty.

    v3 / IDE 1.x PostToolUse payloads often carry `tool_input: {}` while the
    PreToolUse of the same call had it. Pre-tool events without a post-tool
    twin are kept as they are (the call may have been blocked or interrupted).
    """
    tools, waiting = [], {}
    for event in turn:
        if event["kind"] != "tool_use":
            continue
        name = event.get("tool_name")
        if event.get("trigger") == "preToolUse":
            waiting[name] = event
            continue
        pre = waiting.pop(name, None)
        if pre is not None and not event.get("tool_input") and pre.get("tool_input"):
            event = dict(event, tool_input=pre["tool_input"])
        tools.append(event)
    return tools + list(waiting.values())


def _changed_paths(event: dict, root: str) -> "list[str]":
    paths = [relative(p, root) for p in paths_of(event)]
    if not paths and isinstance(event.get("tool_response"), (str, dict)):
        # IDE payloads name the file only in the result
        paths = _PATH_IN_TEXT.findall(_response_text(event)[:300])
    return paths


def _fix_of(tools: list, i: int, root: str) -> str:
    """' — fixed after changing X: `cmd` then succeeded' when a later re-run succeeded."""
    name = tools[i].get("tool_name")
    fix = None
    for later in tools[i + 1 :]:
        if _may_rerun(tools[i], later) and not failed(later):
            fix = later
            break
    if fix is None:
        return ""
    edits = [
        p
        for t in tools[i + 1 : tools.index(fix)]
        if tool_base(t.get("tool_name", "")) in WRITE_TOOLS
        for p in _changed_paths(t, root)
    ]
    via = f" after changing {', '.join(dict.fromkeys(edits))}" if edits else ""
    rerun = f"`{clip(command_of(fix), 120)}`" if command_of(fix) else f"{name}"
    return f" — fixed{via}: {rerun} then succeeded"


def _memory_tool(event: dict) -> bool:
    return is_memory_tool(event.get("tool_name", ""))


def _describe_turn(turn: list, root: str) -> "dict | None":
    prompts = [e.get("prompt") or "" for e in turn if e["kind"] == "prompt"]
    request = " ".join(p.strip() for p in prompts if p.strip())
    closing = " ".join(
        (e.get("assistant_response") or "").strip() for e in turn if e["kind"] == "session_summary"
    )
    tools = paired_tools(turn)
    if not (request or closing.strip() or tools):
        return None

    commands, read, changed, errors, results, tried = [], [], [], [], [], []
    outcome = turn_outcome(tools)
    for i, event in enumerate(tools):
        name = tool_base(event.get("tool_name", ""))
        command = command_of(event)
        if command:
            commands.append(command)
        # a denied or failed write changed nothing
        if name in WRITE_TOOLS and not failed(event):
            changed.extend(_changed_paths(event, root))
        elif not command:
            read.extend(relative(p, root) for p in paths_of(event))
        if (
            not command
            and not paths_of(event)
            and isinstance(event.get("tool_response"), (str, dict))
            # memory's own output is no fact of the turn
            and not _memory_tool(event)
        ):
            text = " ".join(_response_text(event).split())
            if text and not failed(event):
                results.append(f"{event.get('tool_name')}: {clip(text, 160)}")
        if failed(event):
            what = f"`{clip(command, 120)}`" if command else f"{event.get('tool_name')}"
            if resolved(tools, i):
                errors.append(f"{what} failed: {error_line(event)}{_fix_of(tools, i, root)}")
            else:  # the turn's work ended in this failure: never told as done
                tried.append(f"Tried {what}: failed because {error_line(event)}")

    has_stop = any(e["kind"] == "session_summary" for e in turn)
    if not tools and not names_project_content(request, closing):
        # chatter: kept, weighed low, never a session start's headline
        observation_type = "conversation"
    elif has_stop:
        observation_type = "session_summary"
    elif errors or tried:
        observation_type = "error"
    elif tools:
        observation_type = "tool_use"
    else:
        # a question about the project that no answer closed yet
        observation_type = "conversation"

    title = (
        clip(" ".join(request.split()), TITLE_MAX)
        if request
        else (
            clip(" ".join(closing.split()), TITLE_MAX)
            if closing
            else f"Tool activity: {', '.join(dict.fromkeys(tool_base(t.get('tool_name', '')) for t in tools))}"
        )
    )
    sections = []
    if request:
        sections.append(f"**Request:** {clip(request, 1200)}")
    if closing:
        sections.append(f"**Outcome:** {clip(closing, 1500)}")
    if tried:
        sections.append("**Failed:** " + "\n".join(tried[:6]))
    if commands:
        shown = list(dict.fromkeys(clip(c, 160) for c in commands))
        # a failed turn's commands were not done
        verb = "**Tried:** " if outcome == "failed" else "**Ran:** "
        sections.append(
            verb
            + "; ".join(f"`{c}`" for c in shown[:8])
            + (f" (+{len(shown) - 8} more)" if len(shown) > 8 else "")
        )
    if read:
        sections.append("**Read:** " + ", ".join(list(dict.fromkeys(read))[:12]))
    if changed:
        sections.append("**Changed:** " + ", ".join(list(dict.fromkeys(changed))[:12]))
    if results:
        sections.append("**Tool results:**\n" + "\n".join(f"- {r}" for r in list(dict.fromkeys(results))[:6]))
    if errors:
        sections.append("**Errors:**\n" + "\n".join(f"- {e}" for e in errors[:6]))
    summary = clip("\n\n".join(sections), SUMMARY_MAX)

    facts = tried + errors + [f"Changed {p}" for p in dict.fromkeys(changed)] + _sentences(closing, 4)
    return {
        "title": title,
        "summary": summary,
        "facts": clip_list(facts, FACT_MAX, 20),
        "concepts": _concepts([request, closing]),
        "files_touched": clip_list(list(dict.fromkeys(read + changed)), FILE_MAX, FILES_KEPT),
        "observation_type": observation_type,
        "strategy": DETERMINISTIC_STRATEGY,
        "outcome": outcome,
    }


def deterministic(batch: Batch) -> "list[dict]":
    """One record per turn of the batch; no model, no network."""
    records = []
    for turn in split_turns(batch.events):
        record = _describe_turn(turn, batch.project_root)
        if record is not None:
            # Per turn: forgetting a turn leaves none of its events cited.
            record["source_event_ids"] = [e["event_id"] for e in turn]
            records.append(record)
    return records


# LLM extractor


# The prompt, schema and version: kirolearn.pipeline.prompt (re-exported here).


def render_events(batch: Batch, field_chars: int, max_chars: int) -> str:
    """The batch as tagged text for the model, cut to fit `max_chars`."""

    def one(n: int, e: dict, cap: int) -> str:
        attrs = f'n="{n}" kind="{e["kind"]}" at="{e.get("received_at", "")}"'
        if e.get("tool_name"):
            attrs += f' tool="{e["tool_name"]}"'
        body = []
        for key in ("prompt", "tool_input", "tool_response", "assistant_response"):
            value = e.get(key)
            if value in (None, "", {}, []):
                continue
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            body.append(f"<{key}>{cut_text(text, cap)}</{key}>")
        return f"<event {attrs}>" + "".join(body) + "</event>"

    cap = field_chars
    while True:
        blocks = [one(i + 1, e, cap) for i, e in enumerate(batch.events)]
        text = "\n".join(blocks)
        if len(text) <= max_chars or cap <= 200:
            break
        cap //= 2
    # too many events even at the smallest cap: keep both ends
    if len(text) > max_chars:
        head, tail, used = [], [], 0
        for block in blocks:
            if used + len(block) > max_chars // 2:
                break
            head.append(block)
            used += len(block) + 1
        for block in reversed(blocks[len(head) :]):
            if used + len(block) > max_chars:
                break
            tail.insert(0, block)
            used += len(block) + 1
        omitted = len(blocks) - len(head) - len(tail)
        text = "\n".join(head + [f'<omitted events="{omitted}"/>'] + tail)
    return text


def build_messages(batch: Batch, field_chars: int, max_chars: int) -> "list[dict]":
    """Chat messages for one batch."""
    header = f"Project: {os.path.basename(batch.project_root) or batch.project_root}\nSession: {batch.session_id}\n"
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": header + render_events(batch, field_chars, max_chars)},
    ]


FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def unfenced(text: str) -> str:
    """A model's answer without the ```json fence some models wrap it in."""
    match = FENCE.match(text or "")
    return match.group(1) if match else (text or "")


class BotchedAnswer(ExtractionError):
    """The model answered, but not with something usable: invalid JSON, wrong types, empty, cut off,
    too long, or too late. The batch falls back to the deterministic extractor at once."""


ANSWER_MAX_CHARS = 64_000  # longer: a model that ran on, not records
ANSWER_KEPT_CHARS = 8_000  # kept in the run row, scrubbed


def parse_answer(content: str, finish_reason: str = "") -> Extraction:
    """Validate a model answer (tolerating a ```json fence); raises BotchedAnswer saying what is wrong."""
    text = content or ""
    if not text.strip():
        raise BotchedAnswer("malformed answer: empty")
    if len(text) > ANSWER_MAX_CHARS:
        raise BotchedAnswer(
            f"malformed answer: too long ({len(text):,} characters, at most {ANSWER_MAX_CHARS:,})"
        )
    text = unfenced(text)
    try:
        return Extraction.model_validate_json(text)
    except ValidationError as exc:
        cut = " (cut off at max_answer_tokens)" if finish_reason == "length" else ""
        first = exc.errors()[0]
        where = ".".join(map(str, first.get("loc") or ()))
        raise BotchedAnswer(
            f"malformed answer{cut}: {where + ': ' if where else ''}{first['msg']} ({clip(text, 80)!r})"
        ) from None


def candidates_from(extraction: Extraction, batch: Batch) -> "list[dict]":
    """Model candidates as record dicts; adds a turn summary if the model skipped it."""
    records = []
    for c in extraction.records:
        records.append(
            {
                "title": clip(" ".join(c.title.split()), TITLE_MAX),
                "summary": clip(c.summary, SUMMARY_MAX),
                "facts": clip_list(c.facts, FACT_MAX, FACTS_COUNT_MAX),
                "concepts": clip_list([x.lower() for x in c.concepts], CONCEPT_MAX, CONCEPTS_COUNT_MAX),
                "files_touched": clip_list(
                    [relative(p, batch.project_root) for p in c.files_touched], FILE_MAX, FILES_KEPT
                ),
                "observation_type": c.observation_type,
                "strategy": LLM_STRATEGY,
            }
        )
    records = [r for r in records if r["title"] and r["summary"]]
    # the model does not decide a turn's outcome
    outcome = turn_outcome(paired_tools(batch.events))
    for r in records:
        r["outcome"] = outcome
    ended = any(e["kind"] == "session_summary" for e in batch.events)
    if ended and not any(r["observation_type"] == "session_summary" for r in records):
        turns = [t for t in split_turns(batch.events) if any(e["kind"] == "session_summary" for e in t)]
        summary = _describe_turn(turns[-1], batch.project_root) if turns else None
        if summary:
            if summary["observation_type"] == "conversation" and records:
                summary["observation_type"] = (
                    # the model found knowledge in it: not chatter
                    "session_summary"
                )
            records.insert(0, summary)
    return records


TRANSIENT = (
    "Timeout",
    "CallTimeout",
    "APIConnectionError",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "BadGatewayError",
    "APIError",
)


@dataclass
class LLMResult:
    """Records plus what the call cost, for the extraction_runs row.

    note: the run row's fallback_reason (a turn summary the model never gave); answer: the model's
    last raw answer, cut to ANSWER_KEPT_CHARS, for the run's provenance; form: the structured-output
    form of that answer; botched: why the answers were unusable (when the last failure was theirs)."""

    records: list
    request: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    errors: list = field(default_factory=list)
    note: str = ""
    answer: str = ""
    form: str = ""
    botched: str = ""


NO_SUMMARY_NOTE = "turn summary: the model gave none, even when asked again; deterministic-turn record used"


def _ends_turn(batch: Batch) -> bool:
    return any(e["kind"] == "session_summary" for e in batch.events)


def _ask_for_summary(messages: list, answer: str, settings, complete, result: LLMResult) -> "list[Candidate]":
    """One follow-up call asking only for the turn's session_summary record (the seed's `llm-summary`)."""
    follow_up = messages + [
        {"role": "assistant", "content": answer},
        {"role": "user", "content": SUMMARY_REQUEST},
    ]
    try:
        completion = complete(follow_up, settings)
        result.prompt_tokens += completion.prompt_tokens
        result.completion_tokens += completion.completion_tokens
        result.cost_usd += completion.cost_usd
        found = parse_answer(completion.content, completion.finish_reason).records
    except Exception as exc:  # noqa: BLE001
        # the first answer's records still count
        result.errors.append(f"asking for the turn summary: {type(exc).__name__}: {clip(str(exc), 200)}")
        return []
    return [c for c in found if c.observation_type == "session_summary"][:1]


class CallTimeout(Exception):
    """A model call outlived its share of the time budget (the client's own timeout did not fire)."""


HARD_CAP_GRACE = 5.0  # seconds past the timeout: first calls load provider code


def call_bounded(complete, messages, settings, seconds: float, **kwargs):
    """`complete(messages, settings)` with `extract.timeout_seconds` = `seconds`, abandoned after that.

    The client's timeout bounds connect and each read, not a server that trickles
    bytes: the call runs in a daemon thread and is given up (CallTimeout) a
    little after `seconds`; the abandoned thread ends at its own timeout.
    """
    import threading

    seconds = max(0.05, seconds)
    if settings.extract.timeout_seconds != seconds:
        settings = settings.model_copy(deep=True)
        settings.extract.timeout_seconds = seconds
    box: dict = {}

    def run():
        try:
            box["value"] = complete(messages, settings, **kwargs)
        except BaseException as exc:  # noqa: BLE001
            # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="kirolearn-llm-call", daemon=True)
    worker.start()
    worker.join(seconds + HARD_CAP_GRACE)
    if worker.is_alive():
        raise CallTimeout(f"no answer within {seconds:.1f} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def llm_extract(
    batch: Batch, settings, complete, sleep=time.sleep, deadline: "float | None" = None
) -> LLMResult:
    """Extract with a model: bounded retries with backoff; raises ExtractionError with usage attached.

    The whole extraction (every attempt, retry and backoff) ends within
    `extract.call_budget_seconds`, and by `deadline` (time.monotonic()) if given;
    each attempt waits at most `extract.timeout_seconds`.
    """
    ex = settings.extract
    messages = build_messages(batch, ex.max_field_chars, ex.max_prompt_chars)
    result = LLMResult(records=[], request=messages[1]["content"])
    delay = ex.retry_backoff_seconds
    if complete is litellm_complete:
        load_litellm()  # its import takes seconds: not out of the call's time
    until = time.monotonic() + ex.call_budget_seconds
    if deadline is not None:
        until = min(until, deadline)
    for attempt in range(ex.retries + 1):
        left = until - time.monotonic()
        if left <= 0:
            result.errors.append(
                f"out of time: {ex.call_budget_seconds:g} s per batch"
                if deadline is None or until < deadline
                else "out of the drain's model time"
            )
            break
        try:
            result.botched = ""
            completion = call_bounded(complete, messages, settings, min(ex.timeout_seconds, left))
            result.prompt_tokens += completion.prompt_tokens
            result.completion_tokens += completion.completion_tokens
            result.cost_usd += completion.cost_usd
            result.answer = (completion.content or "")[:ANSWER_KEPT_CHARS]
            result.form = completion.form
            extraction = parse_answer(completion.content, completion.finish_reason)
            if _ends_turn(batch) and not any(
                c.observation_type == "session_summary" for c in extraction.records
            ):
                asked = _ask_for_summary(messages, completion.content, settings, complete, result)
                extraction = Extraction.model_construct(records=asked + list(extraction.records))
                result.note = "" if asked else NO_SUMMARY_NOTE
            result.records = candidates_from(extraction, batch)
            return result
        except ExtractionError as exc:
            result.errors.append(str(exc))
            if isinstance(exc, BotchedAnswer):
                result.botched = str(exc)
        except Exception as exc:  # provider errors: any litellm exception class
            result.errors.append(f"{type(exc).__name__}: {clip(str(exc), 200)}")
            if type(exc).__name__ in ("Timeout", "CallTimeout"):
                result.botched = f"past its deadline: {type(exc).__name__}: {clip(str(exc), 120)}"
            if type(exc).__name__ not in TRANSIENT:
                break
        if attempt < ex.retries:
            if time.monotonic() + delay >= until:
                break  # no time left to wait for another try
            sleep(delay)
            delay *= 2
    if result.errors and result.errors[-1].startswith("out of time") and not result.botched:
        # a slow model used the batch's whole budget
        result.botched = result.errors[-1]
    error = ExtractionError("; ".join(result.errors))
    error.result = result  # type: ignore[attr-defined]
    raise error


def load_litellm():
    """Import litellm (seconds, once per process) with no network fetch and no ./.env."""
    # no price-map fetch at import
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # do not load ./.env into our environment
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def litellm_complete(messages: "list[dict]", settings, response_format=None) -> Completion:
    """One chat completion through litellm (imported here, lazily: it costs seconds).

    `response_format` is the pydantic model the answer must match (default: Extraction). It is asked
    for in the structured-output form the server takes (kirolearn.pipeline.structured): the form
    remembered for this model, else json_schema, then json_object with the schema, then plain text,
    stepping down only on an error that says the form is unsupported.
    """
    litellm = load_litellm()
    ex = settings.extract
    target = response_format or Extraction
    forms = structured.forms_to_try(ex.model, ex.api_base)
    for form in forms:
        sent, format_arg = structured.request(form, messages, target)
        kwargs = {"model": ex.model, "messages": sent, "timeout": ex.timeout_seconds, "temperature": 0.2}
        if format_arg is not None:
            kwargs["response_format"] = format_arg
        if ex.max_answer_tokens:
            kwargs["max_tokens"] = ex.max_answer_tokens
        if ex.api_base:
            kwargs["api_base"] = ex.api_base
            if ex.model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
                # a local server wants no key, but the OpenAI client insists
                kwargs["api_key"] = "local"
        if ex.model.startswith("openai/"):
            # the OpenAI SDK retries on its own otherwise; we retry ourselves
            kwargs["max_retries"] = 0
        try:
            response = litellm.completion(**kwargs)
        except Exception as exc:
            if form != forms[-1] and structured.unsupported(exc):
                continue  # the server refused this form: the next one down
            raise
        structured.remember(ex.model, ex.api_base, form)
        break
    usage = getattr(response, "usage", None)
    try:
        cost = float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:
        # unknown model in the price map: tokens are still counted
        cost = 0.0
    choice = response.choices[0]
    return Completion(
        content=choice.message.content or "",
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost_usd=cost,
        finish_reason=str(getattr(choice, "finish_reason", "") or ""),
        form=form,
    )
