"""What a turn's tool calls claim about the code, what it cites, and the signature of its work.

Read from the calls, never from the wording (design.md rule 16):
- **claims** (`turn_claims`): each write that did not fail, resolved against the event's `cwd`,
  read by kirolearn.claims.facts: the settings, dependencies and symbols inside the lines it
  wrote, else those lines themselves. A turn that wrote nothing claims nothing.
- **cites** (`turn_cites`): the records a turn read back through kirolearn's own MCP tools, or
  was shown by the hook and repeats in its answer. Such a turn is an echo of them.
- **signature** (`work_signature`): the same commands with the same arguments, the same files
  written with the same claims, the same outcome; for an echo, the same question citing the same
  records. Only records of one signature are merged.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from kirolearn.claims import facts as factlib
from kirolearn.claims import model
from kirolearn.claims.check import read_file
from kirolearn.core.mcp_tools import is_memory_tool
from kirolearn.pipeline import extract

CLAIMS_PER_FILE = 40
CLAIMS_PER_TURN = 120
_RECORD_ID = re.compile(r"\bmr_[0-9A-HJKMNP-TV-Z]{26}\b")
_FULL_KEYS = ("content", "file_text", "text", "contents")
_NEW_KEYS = ("new_string", "new_str", "newString", "newStr", "new_text", "newText")
# a shell command that writes a file: a heredoc, `sed -i`, a redirected echo
_HEREDOC = re.compile(
    r"(?:^|[;&|]\s*)(?:cat|tee)\b(?P<a>[^\n<]*?)<<-?\s*(['\"]?)(?P<tag>\w+)\2(?P<b>[^\n]*)\n(?P<body>.*?)\n(?P=tag)[ \t]*(?:\n|$)",
    re.S,
)
_TARGET = re.compile(r"(?:(?P<op>>>?)\s*|\btee\s+(?:-a\s+)?)(?P<path>[\w./-]+)")
_SED = re.compile(
    r"\bsed\s+(?:-[a-zA-Z]*i[^\s]*|--in-place\S*)\s+(?:-e\s+)?(['\"])s(.)(.*?)\2(.*?)\2[gI0-9]*\1\s+([\w./-]+)"
)
_ECHO = re.compile(r"\b(?:echo|printf)\s+(['\"])(.*?)\1\s*(>>?)\s*([\w./-]+)")


def _resolve(path: str, cwd: str, root: str) -> str | None:
    """A written path relative to the project root ('/' separated), None outside it."""
    if not path or not root:
        return None
    full = path if os.path.isabs(path) else os.path.join(cwd or root, path)
    try:
        rel = os.path.relpath(os.path.normpath(full), os.path.normpath(root))
    except ValueError:
        return None
    if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
        return None
    return rel.replace(os.sep, "/")


def _patch_files(text: str) -> dict[str, tuple[bool, list[str]]]:
    """Codex's apply_patch: {path: (whole file?, the lines it adds)}."""
    out: dict[str, tuple[bool, list[str]]] = {}
    current, whole = None, False
    for line in text.splitlines():
        head = re.match(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$", line)
        if head:
            current, whole = head.group(2), head.group(1) == "Add"
            if head.group(1) == "Delete":
                current = None
            else:
                out.setdefault(current, (whole, []))
            continue
        moved = re.match(r"^\*\*\* Move to: (.+?)\s*$", line)
        if moved and current:
            out[moved.group(1)] = out.pop(current)
            current = moved.group(1)
            continue
        if current and line.startswith("+") and not line.startswith("+++"):
            out[current][1].append(line[1:])
    return out


def _shell_writes(command: str) -> list[tuple[str, str | None, list[str]]]:
    """The files a shell command writes, read from its own syntax: a heredoc into a file (`cat >
    f <<EOF`, `tee f <<EOF`), `sed -i 's/old/new/' f`, `echo 'x' > f`. Anything else writes
    nothing here: a command's effects are not guessed."""
    out: list[tuple[str, str | None, list[str]]] = []
    for m in _HEREDOC.finditer(command):
        target = _TARGET.search(m.group("a") + " " + m.group("b"))
        if target:
            body = m.group("body") + "\n"
            whole = target.group("op") != ">>" and "-a" not in m.group("a").split()
            out.append((target.group("path"), body if whole else None, [body]))
    for m in _SED.finditer(command):
        new = m.group(4).replace("\\" + m.group(2), m.group(2)).replace("\\n", "\n").replace("&", m.group(3))
        out.append((m.group(5), None, [new.lstrip("^").rstrip("$")]))
    for m in _ECHO.finditer(command):
        text = m.group(2).replace("\\n", "\n") + "\n"
        out.append((m.group(4), text if m.group(3) == ">" else None, [text]))
    return out


def _writes(event: dict) -> list[tuple[str, str | None, list[str]]]:
    """(path as given, the whole new text or None, the fragments it wrote) of one write call."""
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict):
        return []
    shell = extract.command_of(event)
    if shell and "*** Begin Patch" not in shell:
        return _shell_writes(shell)
    base = extract.tool_base(event.get("tool_name", ""))
    patch = tool_input.get("input") or tool_input.get("patch")
    if base == "apply_patch" or (isinstance(patch, str) and "*** Begin Patch" in patch):
        text = patch if isinstance(patch, str) else tool_input.get("command")
        if not isinstance(text, str):
            return []
        return [
            (p, "\n".join(lines) + "\n" if whole else None, ["\n".join(lines)])
            for p, (whole, lines) in _patch_files(text).items()
        ]
    if base not in extract.WRITE_TOOLS:
        return []
    out = []
    for path in extract.paths_of(event):
        command = str(tool_input.get("command") or "").lower()
        full = next((tool_input[k] for k in _FULL_KEYS if isinstance(tool_input.get(k), str)), None)
        fragments = [tool_input[k] for k in _NEW_KEYS if isinstance(tool_input.get(k), str)]
        for edit in tool_input.get("edits") or ():
            if isinstance(edit, dict):
                fragments += [edit[k] for k in _NEW_KEYS if isinstance(edit.get(k), str)]
        if command in ("append", "insert") and full is not None:
            fragments, full = [full], None
        if full is not None and not fragments:
            out.append((path, full, [full]))
        elif fragments:
            out.append((path, None, fragments))
    return out


def _spans(text: str, fragments: list[str]) -> list[tuple[int, int]] | None:
    """The 1-based line span of each fragment in `text`; None when one is not there (the file moved on)."""
    spans = []
    for fragment in fragments:
        body = fragment.replace("\r\n", "\n").strip("\n")
        if not body.strip():
            continue
        at = text.find(body)
        if at < 0:
            return None
        first = text.count("\n", 0, at) + 1
        spans.append((first, first + body.count("\n")))
    return spans


def _innermost(found: list[factlib.Fact]) -> list[factlib.Fact]:
    """The facts that hold no other chosen fact (a setting inside a class, not the class)."""
    return [
        f
        for f in found
        if not any(
            o is not f and f.start <= o.start and o.end <= f.end and (o.start, o.end) != (f.start, f.end)
            for o in found
        )
    ]


def file_claims(
    rel: str,
    text: str,
    spans: list[tuple[int, int]] | None,
    fragments: list[str],
    scrub=None,
    secret: bytes | None = None,
) -> list[model.Claim]:
    """The claims of one file as a turn left it: the facts its spans touch (every fact for a whole
    new file: spans None), else the lines it wrote."""
    digests = factlib.line_digests(text)
    fingerprint = model.fingerprint_of(digests)
    found = factlib.read(rel, text) or {}
    if spans is None:
        chosen = list(found.values())
    else:
        chosen = _innermost([f for f in found.values() if any(f.start <= e and s <= f.end for s, e in spans)])
    claims = [
        model.from_fact(rel, f, fingerprint, scrub=scrub, secret=secret) for f in chosen[:CLAIMS_PER_FILE]
    ]
    if not claims:
        written = set().union(*(factlib.line_digests(f) for f in fragments)) if fragments else set()
        if written:
            claims.append(model.lines_claim(rel, written, fingerprint))
    return claims


def turn_claims(tools: list[dict], root: str, scrub=None, secret: bytes | None = None) -> list[model.Claim]:
    """The claims of one turn's tool calls (paired, oldest first); see the module docstring. `scrub`
    cleans each value shown; one it would redact is digested with the home's `secret`."""
    # rel -> (whole text, fragments, cwd)
    final: dict[str, tuple[str | None, list[str], str]] = {}
    for event in tools:
        if extract.tool_status(event) is False:
            continue  # a failed or denied write claims nothing
        for path, full, fragments in _writes(event):
            rel = _resolve(path, event.get("cwd") or root, root)
            if rel is None:
                continue
            whole, held, _ = final.get(rel, (None, [], ""))
            if full is not None:
                whole, held = full, []
            else:
                held = held + fragments
            final[rel] = (whole, held, event.get("cwd") or root)
    out: list[model.Claim] = []
    for rel, (whole, fragments, _) in final.items():
        text, spans = whole, None
        if whole is not None and fragments:
            edited = _apply(whole, fragments)
            text, spans = (edited, _spans(edited, fragments)) if edited is not None else (whole, None)
        if whole is None:
            data = read_file(root, rel)
            text = data.decode("utf-8", "replace").replace("\r\n", "\n") if data is not None else None
            spans = _spans(text, fragments) if text is not None else None
            # the file moved on since the turn: cite only the lines it wrote
            if spans is None:
                written = set().union(*(factlib.line_digests(f) for f in fragments)) if fragments else set()
                if written:
                    out.append(model.lines_claim(rel, written))
                continue
        written = fragments or [text]  # a whole new file wrote all of its lines
        out.extend(file_claims(rel, text.replace("\r\n", "\n"), spans, written, scrub, secret))
    return _unique(out)[:CLAIMS_PER_TURN]


def _apply(whole: str, fragments: list[str]) -> str | None:
    """A whole text that later edits changed: found as it is when they are in it (else None)."""
    return whole if _spans(whole, fragments) is not None else None


def _unique(claims: list[model.Claim]) -> list[model.Claim]:
    seen: dict[tuple, model.Claim] = {}
    for claim in claims:
        seen[claim.identity] = claim
    return list(seen.values())


def turn_cites(tools: list[dict], answer: str = "", shown: list[dict] = ()) -> list[str]:
    """The records a turn echoes: those kirolearn's MCP tools returned to it, and those the hook showed
    it whose claim (key and value) its answer repeats."""
    cited: list[str] = []
    for event in tools:
        if not is_memory_tool(event.get("tool_name", "")):
            continue
        text = event.get("tool_response")
        text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
        cited += _RECORD_ID.findall(text or "")
    said = " ".join((answer or "").split()).lower()
    for record in shown or ():
        for claim in record.get("claims") or ():
            name = str(claim.get("key") or "").rpartition(".")[2].lower()
            value = str(claim.get("shown") or "").lower()
            if (
                name
                and value
                and name in said
                and re.search(rf"(?<![\w.]){re.escape(value)}(?!\w|\.\w)", said)
            ):
                cited.append(record["record_id"])
                break
    return list(dict.fromkeys(cited))


def normalised_command(command: str) -> str:
    """A command as the same work: its whitespace collapsed, nothing else dropped."""
    return " ".join(command.split()).rstrip(";").strip()


def work_signature(
    tools: list[dict], claims: list[model.Claim], outcome: str, *, prompt: str = "", cites=()
) -> str | None:
    """The signature of a turn's work (module docstring); None for a turn of talk alone."""
    commands = sorted({normalised_command(c) for c in (extract.command_of(t) for t in tools) if c})
    written = sorted({(c.file, c.kind, c.key, c.digest, c.lines) for c in claims})
    if commands or written:
        body = {"outcome": outcome, "commands": commands, "written": written}
    elif cites:
        body = {"echo": " ".join(re.findall(r"\w+", (prompt or "").lower())), "cites": sorted(cites)}
    else:
        return None
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=list).encode()).hexdigest()[:32]


# claims told as facts of a record (what its text is searched by)
FACTS_FROM_CLAIMS = 8


def _shown_ids(turn) -> list[str]:
    """The records the hook showed the turn's session, as its stop event tells (`recall_shown`)."""
    out: list[str] = []
    for event in turn:
        extra = event.get("extra")
        if isinstance(extra, str):
            try:
                extra = json.loads(extra)
            except ValueError:
                extra = None
        if isinstance(extra, dict) and isinstance(extra.get("recall_shown"), list):
            out += [r for r in extra["recall_shown"] if isinstance(r, str)]
    return list(dict.fromkeys(out))


def annotate(
    batch, candidates: list[dict], *, scrub=None, secret: bytes | None = None, claims_of=None
) -> None:
    """Give each candidate record of a batch its turn's claims, cites and work signature, and tell
    its setting and symbol claims as facts. A record made of one turn (the deterministic extractor)
    gets that turn's; one made of the whole batch (a model's) gets the claims of the files it names,
    or all of them when it names none of their files."""
    turns = []
    split = extract.split_turns(batch.events)
    shown_of = [_shown_ids(turn) for turn in split]
    wanted = list(dict.fromkeys(r for ids in shown_of for r in ids))
    known = claims_of(wanted) if claims_of and wanted else {}
    for turn, shown_ids in zip(split, shown_of):
        tools = extract.paired_tools(turn)
        prompt = " ".join((e.get("prompt") or "") for e in turn if e["kind"] == "prompt")
        answer = " ".join((e.get("assistant_response") or "") for e in turn if e["kind"] == "session_summary")
        claims = turn_claims(tools, batch.project_root, scrub, secret)
        shown = [{"record_id": r, "claims": known[r]} for r in shown_ids if known.get(r)]
        cites = turn_cites(tools, answer, shown if not claims else ())
        outcome = extract.turn_outcome(tools)
        turns.append(
            {
                "ids": {e["event_id"] for e in turn},
                "claims": claims,
                "cites": cites,
                "signature": work_signature(tools, claims, outcome, prompt=prompt, cites=cites),
            }
        )
    for cand in candidates:
        source = set(cand.get("source_event_ids") or batch.event_ids)
        mine = [t for t in turns if source <= t["ids"]] or [t for t in turns if source & t["ids"]]
        claims = [c for t in mine for c in t["claims"]]
        # a record of several turns: the claims of the files it names
        if len(mine) > 1:
            named = set(cand.get("files_touched") or ())
            claims = [
                c for c in claims if c.file in named or any(n.endswith("/" + c.file) for n in named)
            ] or claims
        claims = _unique(claims)
        cand["claims"] = [c.to_dict() for c in claims][:CLAIMS_PER_TURN]
        cand["cites"] = list(dict.fromkeys(r for t in mine for r in t["cites"]))[:50]
        cand["work_signature"] = mine[0]["signature"] if len(mine) == 1 else None
        told = [c.described() for c in claims if c.kind != factlib.LINES][:FACTS_FROM_CLAIMS]
        if told:
            cand["facts"] = list(dict.fromkeys([*told, *(cand.get("facts") or [])]))
