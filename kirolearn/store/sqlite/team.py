"""Store-side SQL of team memory for the local SQLite store: project re-keying and attribution.

- `rekey_projects`: a project whose repository has a git remote is identified by that remote
  (kirolearn.core.project.project_id), so rows stored under its old path-derived id move to the new one,
  in every table with a `project_id` column (the FTS index follows through its triggers) and in the
  rows kept inside forgotten records' payloads, so a later `restore` lands under the new id too.
- `backfill_attribution`: records and session summaries made before attribution existed get the
  actor, host and agent of the events they came from (else of this machine's OS user, host, Kiro).
"""

from __future__ import annotations

import json

# rows naming their root beside its id: where the old -> new mapping is learnt
_ROOTED = ("events", "memory_records", "session_summaries")


def _tables_with_project_id(db) -> list[str]:
    names = [
        r[0]
        for r in db.execute(
            "select name from sqlite_master where type = 'table' and sql not like 'CREATE VIRTUAL TABLE%'"
        )
    ]
    return [n for n in names if "project_id" in db[n].columns_dict]


def project_mapping(db, project_id) -> dict[str, str]:
    """{stored id: current id} for every stored project whose id changed.

    `project_id(root)` is the current id of a root. A stored id seen with several roots that
    disagree on the new id (clones whose remotes now differ) is left alone: ambiguous.
    """
    new_by_old: dict[str, set[str]] = {}
    for table in _ROOTED:
        if not db[table].exists():
            continue
        for old, root in db.execute(
            f"select distinct project_id, project_root from {table} where project_root is not null"
        ):
            new_by_old.setdefault(old, set()).add(project_id(root))
    return {old: next(iter(new)) for old, new in new_by_old.items() if len(new) == 1 and old not in new}


def _replace_ids(value, mapping: dict[str, str]):
    """`value` (a JSON-like payload) with every project_id field mapped."""
    if isinstance(value, dict):
        return {
            k: (mapping.get(v, v) if k == "project_id" and isinstance(v, str) else _replace_ids(v, mapping))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_replace_ids(v, mapping) for v in value]
    return value


def rekey_projects(db, project_id) -> dict[str, str]:
    """Move every row of a changed project to its current id; returns the mapping applied."""
    mapping = project_mapping(db, project_id)
    if not mapping:
        return mapping
    for table in _tables_with_project_id(db):
        for old, new in mapping.items():
            db.execute(f"update [{table}] set project_id = ? where project_id = ?", [new, old])
    if db["forgotten_records"].exists():
        marks = ",".join("?" * len(mapping))
        for record_id, payload in list(
            db.execute(
                f"select record_id, payload from forgotten_records where payload is not null "
                f"and project_id in ({marks})",
                [*mapping.values()],
            )
        ):
            try:
                data = json.loads(payload)
            except ValueError:
                continue
            db.execute(
                "update forgotten_records set payload = ? where record_id = ?",
                [json.dumps(_replace_ids(data, mapping), ensure_ascii=False), record_id],
            )
    return mapping


ATTRIBUTION_COLUMNS = ("actor", "host", "agent")


def add_attribution_columns(db) -> None:
    """actor, host and agent on memory_records and session_summaries (events have had them since m001/m015)."""
    for table in ("memory_records", "session_summaries"):
        columns = db[table].columns_dict
        for column in ATTRIBUTION_COLUMNS:
            if column not in columns:
                db[table].add_column(column, str)


def backfill_attribution(db, actor: str, host: str, agent: str = "kiro") -> None:
    """Fill missing attribution from the source events, else with the given defaults."""
    first_event = (
        "(select {col} from events where event_id = json_extract(memory_records.source_event_ids, '$[0]'))"
    )
    for column in ATTRIBUTION_COLUMNS:
        db.execute(
            f"update memory_records set {column} = {first_event.format(col=column)} "
            f"where {column} is null and json_valid(source_event_ids)"
        )
    session_event = (
        "(select {col} from events where events.session_id = session_summaries.session_id "
        "and events.project_id = session_summaries.project_id order by event_id limit 1)"
    )
    for column in ATTRIBUTION_COLUMNS:
        db.execute(
            f"update session_summaries set {column} = {session_event.format(col=column)} where {column} is null"
        )
    for table in ("memory_records", "session_summaries"):
        for column, value in zip(ATTRIBUTION_COLUMNS, (actor, host, agent)):
            db.execute(f"update {table} set {column} = ? where {column} is null", [value])


def session_agent(db, project_id: str, session_id: str) -> str | None:
    """The agent whose hooks recorded this session's events (None when it has none)."""
    row = db.execute(
        "select agent from events where project_id = ? and session_id = ? order by event_id limit 1",
        [project_id, session_id],
    ).fetchone()
    return row[0] if row else None
