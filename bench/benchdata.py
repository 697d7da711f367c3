"""Shared by the retrieval benchmarks: load the data sets, ingest turns through the
real spool → drain path (in process), and score rankings.

Ingestion is in-process for speed but uses the product's own code end to end:
`events.build_event` (what kirolearn-hook runs) → `spool.append` → `drain.Drainer.run_once`
(dedup, scrub, deterministic extraction, store, embeddings and enrichment). Only the
process start of each hook call is skipped.
"""

import gzip
import json
import os
import zipfile
from datetime import datetime

from benchstore import as_store  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LOCOMO_ZIP = os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared", "bench", "locomo", "locomo10.zip")
DISTRACTORS = os.path.join(HERE, "data", "coding_distractors.jsonl.gz")
CODING_SET = os.path.join(HERE, "data", "coding_set.json")


def locomo_conversations(zip_path: str = LOCOMO_ZIP):
    """[(conv_id, [(session_no, date_epoch, [turn dicts])], [qa])] from the public release."""
    out = []
    with zipfile.ZipFile(zip_path) as zf:
        for name in sorted(n for n in zf.namelist() if n.endswith(".json")):
            data = json.loads(zf.read(name))
            conv_id = os.path.basename(name)[:-5]
            sessions = []
            k = 1
            while f"session_{k}" in data:
                when = _locomo_date(data.get(f"session_{k}_date_time", ""))
                sessions.append((k, when, data[f"session_{k}"]))
                k += 1
            out.append((conv_id, sessions, data["qa"]))
    return out


def _locomo_date(text: str) -> float:
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").timestamp()
    except ValueError:
        return datetime(2023, 1, 1).timestamp()


def turn_text(turn: dict) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def distractors(limit: "int | None" = None) -> "list[str]":
    with gzip.open(DISTRACTORS, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line)["text"] for line in fh]
    return rows[:limit] if limit else rows


def coding_set() -> dict:
    with open(CODING_SET, encoding="utf-8") as fh:
        return json.load(fh)


def make_project(path: str) -> str:
    os.makedirs(os.path.join(path, ".git"), exist_ok=True)
    return path


def spool_turn(
    project: str, session_id: str, prompt: str, when: float, outcome: "str | None" = None
) -> "list[str]":
    """Write one turn (a prompt, optionally a stop with the agent's answer) to the spool; returns event ids."""
    from kirolearn.capture import events, spool

    ids = []
    payload = {
        "hook_event_name": "userPromptSubmit",
        "cwd": project,
        "session_id": session_id,
        "prompt": prompt,
    }
    event = events.build_event("userPromptSubmit", payload, now=when)
    spool.append(event["event_id"], events.serialize(event))
    ids.append(event["event_id"])
    if outcome is not None:
        payload = {
            "hook_event_name": "stop",
            "cwd": project,
            "session_id": session_id,
            "assistant_response": outcome,
        }
        event = events.build_event("stop", payload, now=when + 1)
        spool.append(event["event_id"], events.serialize(event))
        ids.append(event["event_id"])
    return ids


def drain_all(progress=None) -> dict:
    """Drain the spool completely (flush every buffered session) and return the stats."""
    from kirolearn import settings
    from kirolearn.pipeline import drain
    from kirolearn.store.sqlite import db as store

    db = store.open_db()
    conf = settings.load()
    lock = drain.lock()
    try:
        stats = drain.Drainer(as_store(db), conf, progress=progress).run_once(flush=True)
    finally:
        lock.release()
    db.conn.close()
    return stats


def record_sources(conn) -> "dict[str, list[str]]":
    """record_id -> its source event ids."""
    return {
        r[0]: json.loads(r[1] or "[]")
        for r in conn.execute("select record_id, source_event_ids from memory_records")
    }


def score(ranked: "list[str]", gold: "set[str]", k: int) -> "tuple[float, float]":
    """(recall of the gold set in the top k, hit: any gold in the top k)."""
    top = set(ranked[:k])
    found = len(top & gold)
    return found / len(gold), float(found > 0)


class PlainBM25:
    """The baseline: FTS5 BM25 over title and summary alone, every word of the question OR-ed.

    Its own in-memory index, so kirolearn's hidden columns cannot change its length
    normalisation (FTS5 BM25 counts every column of a row in the document length).
    """

    def __init__(self, conn):
        import sqlite3

        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "create virtual table f using fts5(title, summary, pid unindexed, rid unindexed, "
            "tokenize='porter')"
        )
        self.db.executemany(
            "insert into f values (?, ?, ?, ?)",
            conn.execute("select title, summary, project_id, record_id from memory_records").fetchall(),
        )

    def __call__(self, question: str, pid: str, k: int) -> "list[str]":
        import re

        words = list(dict.fromkeys(w.lower() for w in re.findall(r"\w+", question)))
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        return [
            r[0]
            for r in self.db.execute(
                "select rid from f where f match ? and pid = ? order by bm25(f) limit ?", [match, pid, k]
            )
        ]
