"""Memory that stays true (issue #31): supersede and near-duplicate detection, without a model.

**Supersede.** A record states values of settings ("set RETRIES to 3", "RETRIES = 3", "raised RETRIES
from 3 to 7", "RETRIES: 3 -> 7", "RETRIES was 3; it is 7 now"). A newer record of the same project
supersedes an older one when both state a value of the same identifier (a name with an underscore, a
digit, camelCase or ALL CAPS), the older's values are not all among the newer's, and, when both name
files, they share one. Values are numbers, quoted strings and a few literals (true, false, none, on,
off, ALL-CAPS words): a sentence that only mentions a name states nothing. Precision first: two records
about the same file but no stated value never supersede each other.

**Near duplicates.** Two records are the same chore when they ran the same commands (each program
given about the same words, flags and paths' trailing slashes aside; `_close`), neither holds an
error, and, when both name files, their files are the same. A record that does not say what it ran
(Kiro IDE 0.x) is never grouped: its output alone cannot tell a chore from the same program scoped
to other work. `near_identical` (what the drain merges by itself) also
asks for the very same command lines.

Candidates come from the FTS index (kirolearn.store.sqlite.records.mark_candidates), a few per new
record: the cost follows the new records, never the store (rule 15 in docs/architecture.md).
"""

from __future__ import annotations

import re

from kirolearn.store.sqlite import records as recordstore

CANDIDATES = 30  # older records compared with each new one (FTS matches, newest first)

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_VALUE = (r"\"[^\"\n]{0,40}\"|'[^'\n]{0,40}'|-?\d+(?:\.\d+)?(?:[a-zA-Z%]{0,3})?\b"
          r"|(?-i:(?:true|false|none|null|on|off|True|False|None)\b|[A-Z][A-Z0-9_]+\b)")
_FROM_TO = re.compile(rf"\b(?P<s>{_IDENT})`?\s+(?:from|was)\s+`?(?P<a>{_VALUE})`?\s*(?:to|->|→|;\s*it is(?: now)?)\s+`?(?P<b>{_VALUE})")
_ARROW = re.compile(rf"\b(?P<s>{_IDENT})`?\s*:\s*`?(?P<a>{_VALUE})`?\s*(?:->|→)\s*`?(?P<b>{_VALUE})")
_ASSIGN = re.compile(rf"\b(?P<s>{_IDENT})`?\s*(?:=|:=|==)\s*`?(?P<b>{_VALUE})")
_VERB = re.compile(rf"\b(?:set|sets|setting|change|changed|changes|raise|raised|lower|lowered|bump|bumped|make|made|"
                   rf"configure|configured|update|updated|increase|increased|decrease|decreased)\s+`?(?P<s>{_IDENT})`?"
                   rf"\s+(?:to\s+|as\s+|=\s*)?`?(?P<b>{_VALUE})", re.IGNORECASE)
_IS = re.compile(rf"\b(?P<s>{_IDENT})`?\s+(?:is|should be|becomes|became)(?: now)?\s+`?(?P<b>{_VALUE})")
_WAS = re.compile(rf"\(was\s+`?(?P<a>{_VALUE})`?\)")
_ERROR = re.compile(r"\*\*Errors:\*\*|\bfailed\b|\berror\b|Traceback|Exit Code: [1-9]|exit_code|Read-only file system|"
                    r"Permission denied|\bFAIL\b", re.IGNORECASE)
_RAN = re.compile(r"\*\*Ran:\*\*([^\n]*)")
_TICKED = re.compile(r"`([^`\n]+)`")


def is_identifier(name: str) -> bool:
    """A name a setting or symbol would have: an underscore or digit, camelCase, or ALL CAPS (3+)."""
    if len(name) < 3 or name.lower() in {"the", "this", "that", "it", "value"}:
        return False
    core = name.replace(".", "")
    return ("_" in core or any(c.isdigit() for c in core) or (core[:1].islower() and core.lower() != core)
            or (core.isupper() and len(core) >= 3))


def _norm(value: str) -> str:
    return value.strip().strip("`").strip("\"'").lower()


def record_text(record: dict) -> str:
    return "\n".join([record.get("title") or "", record.get("summary") or "",
                      *(str(f) for f in record.get("facts") or ())])


def statements(record: dict) -> "dict[str, tuple[set, set]]":
    """{identifier: (values the record gives it, values it says it had before)}. Its tool results are
    not read: what a file held when the turn read it (`PAGE_SIZE = 20`) is not what the turn stated."""
    text = _RESULTS.sub("", record_text(record))
    out: "dict[str, tuple[set, set]]" = {}

    def put(subject, new=None, old=None):
        if not is_identifier(subject):
            return
        now, before = out.setdefault(subject, (set(), set()))
        if new is not None:
            now.add(_norm(new))
        if old is not None:
            before.add(_norm(old))

    for pattern in (_FROM_TO, _ARROW):
        for m in pattern.finditer(text):
            put(m["s"], m["b"], m["a"])
    for pattern in (_ASSIGN, _VERB, _IS):
        for m in pattern.finditer(text):
            put(m["s"], m["b"])
            tail = text[m.end():m.end() + 30]
            was = _WAS.match(tail.lstrip())
            if was:
                put(m["s"], old=was["a"])
    # a value named as the old one is not current (sed quotes the old line too)
    return {s: (now - before, before) for s, (now, before) in out.items() if now - before}


def supersede_reason(new: dict, old: dict) -> "str | None":
    """Why `new` supersedes `old` ("RETRIES: 3 -> 7"), or None when it does not."""
    if new["record_id"] == old["record_id"] or new.get("project_id") != old.get("project_id"):
        return None
    if (old.get("created_at") or "", old["record_id"]) >= (new.get("created_at") or "", new["record_id"]):
        return None
    new_files, old_files = set(new.get("files_touched") or ()), set(old.get("files_touched") or ())
    if new_files and old_files and not new_files & old_files:
        return None
    mine, theirs = statements(new), statements(old)
    for subject in sorted(set(mine) & set(theirs)):
        now, _ = mine[subject]
        was, _ = theirs[subject]
        if was and not was <= now:
            return f"{subject}: {', '.join(sorted(was))} -> {', '.join(sorted(now))}"
    return None


def subjects(record: dict) -> "list[str]":
    """The identifiers a record states a value of (what FTS looks up among older records)."""
    return sorted(statements(record))


# Near duplicates


def commands(record: dict) -> "list[str]":
    """The command lines a record ran (its summary's **Ran:** line), in order."""
    found = []
    for line in _RAN.findall(record.get("summary") or ""):
        found += [c.strip() for c in _TICKED.findall(line)]
    return found


def _word(word: str) -> str:
    word = word.strip("'\"").rstrip("/")
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word


_VERSION = re.compile(r"v?\d+(?:\.\d+){1,3}")


def _chore_word(word: str) -> str:
    """_word, with a version number as one word: `git tag v1.4.3` and `git tag v1.4.5` are one chore."""
    word = _word(word)
    return "<version>" if _VERSION.fullmatch(word) else word


# Flags whose value names what the work is done to (a package, a workspace, a service, a test
# selection, an image, a config file), not how: `npm run build --workspace admin` is other work than
# `npm run build`, while `isort --profile black src` is `isort src` done another way.
SELECTOR_FLAGS = frozenset((
    "-p", "--package", "-pl", "--projects", "--project", "--workspace", "-w", "--filter", "--scope",
    "--service", "-x", "-k", "-t", "--tag", "--target", "-f", "--file", "--config", "-C", "--directory",
    "--dir", "--app", "-e", "--env", "--path", "--only", "--select", "--include", "--exclude", "--profile-name"))


def selectors(command: str) -> "frozenset[str]":
    """What a command is scoped to: each SELECTOR_FLAGS value (`--workspace=admin`, `-k pool_size`, `-x
    service=billing`) and each NAME=value argument (`make migrate SERVICE=billing`), as "flag value"."""
    words = command.split()
    out = set()
    i = 1
    while i < len(words):
        word = words[i]
        flag, eq, value = word.partition("=")
        if word.startswith("-") and flag in SELECTOR_FLAGS:
            if eq:
                out.add(f"{flag} {value}")
            elif i + 1 < len(words) and not words[i + 1].startswith("-"):
                out.add(f"{flag} {words[i + 1]}")
                i += 1
        elif not word.startswith("-") and "=" in word[1:] and not word.startswith(("'", '"')):
            out.add(word)
        i += 1
    return frozenset(out)


def _plain_words(command: str) -> "list[str]":
    """A command's words but its flags and what `selectors` took (a selector's value, NAME=value)."""
    words = command.split()
    out, skip = [], False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = (word in SELECTOR_FLAGS and i + 1 < len(words) and not words[i + 1].startswith("-"))
            continue
        if i and "=" in word[1:] and not word.startswith(("'", '"')):
            continue
        out.append(word)
    return out


def command_words(record: dict) -> "dict[str, set]":
    """{program: the words (not flags) its commands in this record were given}: `black src/` and
    `black --quiet src` are {"black": {"src"}}; `make reset-db seed` and `make reset-db`; `make seed`
    are {"make": {"reset-db", "seed"}}. A selector (`selectors`) is no word: command_selectors."""
    out: "dict[str, set]" = {}
    for command in commands(record):
        words = _plain_words(command)
        if words:
            out.setdefault(words[0], set()).update(_chore_word(w) for w in words[1:] if _word(w))
    return out


def flag_values(record: dict) -> "dict[str, set]":
    """{program: the words its commands gave as the value of a flag that is no selector}: how the work
    was done (`--mode production`, `-d htmlcov`, `--template buf.gen.yaml`), not what it was done to."""
    out: "dict[str, set]" = {}
    for command in commands(record):
        words = _plain_words(command)
        if not words:
            continue
        seen = command.split()
        for flag, value in zip(seen, seen[1:]):
            if (flag.startswith("-") and "=" not in flag and flag not in SELECTOR_FLAGS
                    and not value.startswith("-")):
                out.setdefault(words[0], set()).add(_chore_word(value))
    return out


def command_selectors(record: dict) -> "dict[str, frozenset]":
    """{program: what its commands in this record were scoped to} (`selectors`)."""
    out: "dict[str, set]" = {}
    for command in commands(record):
        words = _plain_words(command)
        if words:
            out.setdefault(words[0], set()).update(selectors(command))
    return {p: frozenset(v) for p, v in out.items()}


def command_head(command: str) -> str:
    """A command's program and first word, without flags or a path's trailing slash ("black src")."""
    words = [w.rstrip("/") for w in command.split() if not w.startswith("-")]
    words = [w for w in words if w]
    return " ".join(words[:2])


_DIGITS = re.compile(r"\d+(?:\.\d+)*")
_RESULTS = re.compile(r"\*\*Tool results:\*\*\n((?:- [^\n]*\n?)+)")


def tool_results(record: dict) -> "frozenset[str]":
    """The record's tool-result lines with their numbers blanked ("execute_bash: reformatted # files"):
    what stands for its commands when the agent did not say what it ran (Kiro v3's empty tool_input)."""
    found = set()
    for block in _RESULTS.findall(record.get("summary") or ""):
        found.update(_blank(line[2:].rstrip("…")) for line in block.splitlines() if line.startswith("- "))
    return frozenset(f for f in found if f)


def _blank(line: str) -> str:
    return " ".join(_DIGITS.sub("#", line).split()).lower()


def has_error(record: dict) -> bool:
    """A record of a failed attempt: its outcome mark says so (m020), or its text shows an error."""
    return record.get("outcome") == "failed" or bool(_ERROR.search(record_text(record)))


def _close(a: set, b: set, how: "set | frozenset" = frozenset()) -> bool:
    """About the same words: equal; one a subset of the other whose extra words are all flag values
    (`how`: `npm run build` and `npm run build -- --mode production`); or two thirds of them shared.
    An extra positional word is other work: `make seed` is not `make reset-db seed`."""
    if not a or not b:
        return a == b
    small, big = (a, b) if len(a) <= len(b) else (b, a)
    if small <= big and big - small <= how:
        return True
    return len(a & b) * 3 >= 2 * len(a | b)


def same_chore(a: dict, b: dict, results_of=None) -> "str | None":
    """Why two records are the same chore done twice, or None. Both must say what they ran: a record
    with tool results only (Kiro IDE 0.x) is never grouped (`results_of` is accepted and not used)."""
    if a["record_id"] == b["record_id"] or a.get("project_id") != b.get("project_id"):
        return None
    wa, wb = command_words(a), command_words(b)
    if not wa or not wb or set(wa) != set(wb):
        return None
    if has_error(a) or has_error(b) or statements(a) or statements(b):
        return None  # a failure is not a chore done; a record that sets a value is for supersede
    fa, fb = set(a.get("files_touched") or ()), set(b.get("files_touched") or ())
    if (fa or fb) and fa != fb:
        return None
    how_a, how_b = flag_values(a), flag_values(b)
    if not all(_close(wa[p], wb[p], how_a.get(p, set()) | how_b.get(p, set())) for p in wa):
        return None
    if command_selectors(a) != command_selectors(b):
        return None  # the same program scoped to another package, service, test or image
    return "same commands: " + "; ".join(f"{p} {' '.join(sorted(wa[p] | wb[p]))}".strip() for p in sorted(wa))


def near_identical(a: dict, b: dict) -> "str | None":
    """Why two records are near-identical (the drain merges these by itself), or None."""
    lines = [" ".join(c.split()) for c in commands(a)]
    # the command lines first: a cheap test that turns away most candidates before same_chore's regexes
    if not lines or lines != [" ".join(c.split()) for c in commands(b)] or same_chore(a, b) is None:
        return None
    return "identical commands: " + "; ".join(commands(a))


def chore_words(record: dict, results=()) -> "list[str]":
    """Words FTS finds a record's chore siblings by: its commands' programs and words, and the words of
    its tool results (`results`, else its summary's)."""
    words = []
    for program, args in command_words(record).items():
        words += re.findall(r"[A-Za-z0-9_]{2,}", program + " " + " ".join(args))
    for line in results or tool_results(record):
        words += [w for w in re.findall(r"[A-Za-z_]{4,}", line.partition(":")[2])]
    return sorted(set(words))[:16]


def groups(records: "list[dict]", candidates_of, rule=same_chore) -> "list[dict]":
    """Groups of records that `rule` joins, pair by pair (connected: a record joins a group when it is
    the same as one of its members), each {"record_ids" (oldest first), "into" (the newest, the
    survivor), "why", "records"}. `candidates_of(record)` gives the records to compare it with."""
    parent: dict = {}
    known: dict = {}
    why: dict = {}

    def root(rid):
        while parent.setdefault(rid, rid) != rid:
            parent[rid] = parent[parent[rid]]
            rid = parent[rid]
        return rid

    for rec in records:
        known.setdefault(rec["record_id"], rec)
        for other in candidates_of(rec):
            if other["record_id"] == rec["record_id"]:
                continue
            reason = rule(rec, other)
            if reason:
                known.setdefault(other["record_id"], other)
                a, b = root(rec["record_id"]), root(other["record_id"])
                if a != b:
                    parent[b] = a
                    why[a] = why.get(a) or why.get(b) or reason
    members: dict = {}
    for rid in parent:
        members.setdefault(root(rid), []).append(known[rid])
    out = []
    for top, group in members.items():
        if len(group) < 2:
            continue
        group.sort(key=lambda r: (r.get("created_at") or "", r["record_id"]))
        out.append({"record_ids": [m["record_id"] for m in group], "into": group[-1]["record_id"],
                    "why": why.get(top, ""), "records": group})
    out.sort(key=lambda g: (g["records"][0].get("created_at") or "", g["record_ids"][0]))
    return out


def union(records: "list[dict]") -> dict:
    """The list fields of a merged group: every source event, fact, concept and file, in first-seen order."""
    out = {}
    for key in ("source_event_ids", "facts", "concepts", "files_touched"):
        seen: dict = {}
        for rec in records:
            for value in rec.get(key) or ():
                seen.setdefault(value if not isinstance(value, (list, dict)) else str(value), value)
        out[key] = list(seen.values())
    return out


def merge_group(db, group: dict, *, actor: str) -> bool:
    """Fold a group into its survivor (kirolearn.store.sqlite.records.merge_records)."""
    survivor = next(r for r in group["records"] if r["record_id"] == group["into"])
    ordered = [survivor] + [r for r in group["records"] if r is not survivor]
    others = [r["record_id"] for r in group["records"] if r is not survivor]
    return recordstore.merge_records(db, group["into"], others, union(ordered), actor=actor,
                                     reason=group["why"])


# --- a later success of the same work --------------------------------------------------------------

_TRIED = re.compile(r"Tried `([^`\n]+)`: failed because")


def _args(command: str) -> "tuple[str, frozenset]":
    """A command's program and the words it was given, flags and leading VAR=value aside, each word as
    command_words normalises it: `pytest -q tests/api/` and `pytest tests/api` are one."""
    words = [w for w in command.split() if w and not w.startswith("-")]
    while words and "=" in words[0]:
        words.pop(0)
    if not words:
        return "", frozenset()
    return words[0], frozenset(_word(w) for w in words[1:] if _word(w))


def _same_work(a: str, b: str) -> bool:
    """Is command `b` the very work of command `a`: the same program given the same words (flags aside)?
    `pytest tests/test_api.py` is not `pytest tests/test_db.py`, nor `pytest` alone."""
    pa, wa = _args(a)
    pb, wb = _args(b)
    return bool(pa) and pa == pb and wa == wb


_SPAN = re.compile(r"`([^`\n]{3,200})`")


def request_spans(text: str) -> "frozenset[str]":
    """The code a request quotes in backticks (`pytest tests/test_api.py`), whitespace-normalised: what
    names the work when the agent's tool calls do not (Kiro IDE 0.x)."""
    return frozenset(" ".join(m.split()) for m in _SPAN.findall(text or "") if m.strip())


def work_reader(db):
    """A `work_of(record)`: {"failed": the calls a record's turn left failed, each ("command", text),
    ("files", paths) or ("unnamed", tool name: a call sent without its input, Kiro IDE 0.x), or None when
    there are none; "done": commands that ended well or with no status; "wrote": paths written by calls
    that did not fail; "unnamed_ok": tools of calls without input that ended well; "spans": the code the
    turn's request quotes (request_spans)}, read from its source events (once per record), else from
    its summary (a failed record's `Tried X: failed because`, a record's **Ran:**)."""
    from kirolearn.pipeline import extract

    cache: dict = {}

    def work_of(record: dict) -> dict:
        rid = record["record_id"]
        if rid in cache:
            return cache[rid]
        root = record.get("project_root") or ""
        events = recordstore.events_by_ids(db, record.get("source_event_ids") or (), limit=80)
        tools = extract.paired_tools([e["body"] for e in events if isinstance(e.get("body"), dict)
                                       and e["body"].get("kind") == "tool_use"])
        failed: "list | None" = []
        done, wrote, unnamed_ok = [], set(), set()
        prompts = [e["body"].get("prompt") or "" for e in events
                   if isinstance(e.get("body"), dict) and e["body"].get("kind") == "prompt"]
        spans = request_spans("\n".join(prompts) if prompts else record.get("title") or "")
        for i, body in enumerate(tools):
            command = extract.command_of(body)
            paths = [extract.relative(p, root) for p in extract.paths_of(body)]
            if extract.failed(body):
                if extract.resolved(tools, i):
                    continue
                if command:
                    failed.append(("command", command))
                elif paths:
                    failed.append(("files", frozenset(paths)))
                else:
                    failed.append(("unnamed", body.get("tool_name") or ""))
            elif command:
                tail = extract.response_text(body)[-2000:] if extract.tool_status(body) is None else ""
                if extract.STRONG_ERROR.search(tail) or extract.WEAK_ERROR.search(tail):
                    continue  # no status, and its output reads as an error: not known to be done
                done.append(command)
            elif extract.tool_base(body.get("tool_name", "")) in extract.WRITE_TOOLS:
                wrote.update(paths)
            elif not body.get("tool_input") and extract.tool_status(body) is True:
                unnamed_ok.add(body.get("tool_name") or "")
        if not tools:  # no events (expired, imported): what the summary says
            text = record_text(record)
            failed = [("command", c) for c in dict.fromkeys(_TRIED.findall(text))] or None
            done = commands(record)
        cache[rid] = {"failed": failed or None, "done": done, "wrote": wrote, "unnamed_ok": unnamed_ok,
                      "spans": spans}
        return cache[rid]

    return work_of


def fixes_failure(new: dict, old: dict, work_of) -> "str | None":
    """Why `new`, a later turn that ended well, did the very work `old`, a failed attempt, failed at
    (every call `old` left failed: the same command run again without failure, or the same files
    written), or None. Precision first: another command that also failed, or a success of another
    command, is never superseded.

    A failed call sent without its input (Kiro IDE 0.x) counts as done again only when `old`'s request
    quotes its work in backticks and `new` names it the same way: `new` ran a quoted command (the same
    work, flags aside), or its request quotes every span `old`'s did and a call of the same tool, also
    without input, ended well in it. A request that quotes nothing leaves such a failure as it is."""
    if new["record_id"] == old["record_id"] or new.get("project_id") != old.get("project_id"):
        return None
    if old.get("outcome") != "failed" or new.get("outcome") == "failed":
        return None
    if (old.get("created_at") or "", old["record_id"]) >= (new.get("created_at") or "", new["record_id"]):
        return None
    if new.get("outcome") != "succeeded" and has_error(new):
        return None  # unknown but done: it ran the work and shows no error
    tried, later = work_of(old), work_of(new)
    if not tried["failed"]:
        return None
    said = []
    for kind, what in tried["failed"]:
        if kind == "command":
            again = next((c for c in later["done"] if _same_work(what, c)), None)
            if again is None:
                return None
            said.append(f"`{again}`")
        elif kind == "files" and what and what <= later["wrote"]:
            said.append(", ".join(sorted(what)))
        elif kind == "unnamed" and tried["spans"]:
            ran = [next((c for c in later["done"] if _same_work(span, c)), None)
                   for span in sorted(tried["spans"])]
            if all(ran):
                said += [f"`{c}`" for c in ran]
            elif what in later["unnamed_ok"] and tried["spans"] <= later["spans"]:
                said.append(" ".join(f"`{span}`" for span in sorted(tried["spans"])) + " (as requested)")
            else:
                return None
        else:
            return None
    return "a later success of the same work: " + "; ".join(dict.fromkeys(said))


def failure_words(record: dict, work_of) -> "list[str]":
    """Words FTS finds the failed attempts a record may fix by: its commands' words and its written files'."""
    work = work_of(record)
    words = []
    for command in work["done"]:
        program, args = _args(command)
        words += re.findall(r"[A-Za-z0-9_]{2,}", program + " " + " ".join(args))
    for path in work["wrote"]:
        words += re.findall(r"[A-Za-z0-9_]{2,}", path)
    if work["unnamed_ok"] or work["done"]:  # what it quoted: a failed attempt without input names only that
        for span in work["spans"]:
            program, args = _args(span)
            words += re.findall(r"[A-Za-z0-9_]{2,}", program + " " + " ".join(args))
    return sorted(set(words))[:16]


# The drain's pass


ASKED_PER_RECORD = 2  # a new record's undecided candidates the model may be asked about


def mark_new(db, record_ids: "list[str]", *, merge: bool = True, log=None, judge=None) -> dict:
    """After new records are stored: supersede what they changed, and merge near-identical chores.

    Each new record is compared with at most CANDIDATES older live records that FTS finds by its
    stated identifiers (and its commands' words). `judge(new, old)` (kirolearn.pipeline.judge), when
    given, is asked about a new record's first ASKED_PER_RECORD candidates the rules left undecided.
    Returns {"superseded": [[old, new, why]], "merged": [...]}.
    """
    done: dict = {"superseded": [], "merged": []}
    if not record_ids or not recordstore.has_marks(db):
        return done
    fresh = [r for r in (recordstore.get_record(db, rid) for rid in dict.fromkeys(record_ids)) if r]
    fresh.sort(key=lambda r: (r.get("created_at") or "", r["record_id"]))
    for new in fresh:
        words = subjects(new)
        if not words:
            continue
        asked = 0
        for old in recordstore.mark_candidates(db, new["project_id"], words, exclude=[new["record_id"]],
                                               before=new.get("created_at"), limit=CANDIDATES):
            why = supersede_reason(new, old)
            if why is None and judge is not None and asked < ASKED_PER_RECORD and new.get("outcome") != "failed":
                asked += 1
                why = judge(new, old)
            if why and recordstore.set_mark(db, old["record_id"], "superseded_by", new["record_id"],
                                            actor="drain", reason=f"superseded: {why}"):
                done["superseded"].append([old["record_id"], new["record_id"], why])
                if log:
                    log(f"superseded {old['record_id']} by {new['record_id']} ({why})")
    work_of = work_reader(db)
    for new in fresh:  # a later success of the same work supersedes a failed attempt
        if new.get("outcome") == "failed":
            continue
        words = failure_words(new, work_of)
        if not words:
            continue
        for old in recordstore.mark_candidates(db, new["project_id"], words, exclude=[new["record_id"]],
                                               before=new.get("created_at"), limit=CANDIDATES, outcome="failed"):
            why = fixes_failure(new, old, work_of)
            if why and recordstore.set_mark(db, old["record_id"], "superseded_by", new["record_id"],
                                            actor="drain", reason=f"superseded: {why}"):
                done["superseded"].append([old["record_id"], new["record_id"], why])
                if log:
                    log(f"superseded {old['record_id']} by {new['record_id']} ({why})")
    if merge:
        live = [r for r in (recordstore.get_record(db, r["record_id"]) for r in fresh)
                if r and not r.get("merged_into") and commands(r)]  # identical command lines only

        def candidates(rec):
            return recordstore.mark_candidates(db, rec["project_id"], chore_words(rec), exclude=[rec["record_id"]],
                                               limit=CANDIDATES)

        for group in groups(live, candidates, rule=near_identical):
            if merge_group(db, group, actor="drain"):
                done["merged"].append({k: group[k] for k in ("record_ids", "into", "why")})
                if log:
                    log(f"merged {', '.join(group['record_ids'])} into {group['into']} ({group['why']})")
    return done
