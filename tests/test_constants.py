"""Constants written once: the observation types, the limits of a record, the timestamp format.

Each derived place is checked against the one definition, so a new type or a
changed limit that misses one of them fails here, not in a user's hands.
"""

import ast
import pathlib
import typing

import click
import pytest
from conftest import as_store

from kirolearn.core import isotime
from kirolearn.core.observation_types import HAND_MADE_TYPES, NOTABLE_TYPES, OBSERVATION_TYPES
from kirolearn.store import record as schema

PACKAGE = pathlib.Path(__file__).parent.parent / "kirolearn"


# --- observation types -----------------------------------------------------------------------------------


def test_the_schema_and_the_extractor_accept_exactly_the_types():
    from kirolearn.pipeline import extract

    assert typing.get_args(schema.ObservationType) == OBSERVATION_TYPES
    assert schema.OBSERVATION_TYPES is OBSERVATION_TYPES
    assert typing.get_args(extract.Candidate.model_fields["observation_type"].annotation) == OBSERVATION_TYPES
    assert f"one of {'|'.join(OBSERVATION_TYPES)}," in extract.SYSTEM_PROMPT
    assert set(HAND_MADE_TYPES) == set(OBSERVATION_TYPES) - {"session_summary", "conversation"}
    assert set(NOTABLE_TYPES) == set(OBSERVATION_TYPES) - {"tool_use", "conversation"}


def test_recall_weighs_every_type():
    from kirolearn.recall import lexical

    assert set(lexical.TYPE_WEIGHTS) == set(OBSERVATION_TYPES)


def test_every_type_option_of_the_cli_offers_every_type():
    from kirolearn.cli import manage as cli_manage  # noqa: F401 - registers list, show, ... on the group
    from kirolearn.cli.commands import cli

    seen = []
    for name, command in cli.commands.items():
        for param in command.params:
            if isinstance(param.type, click.Choice) and "discovery" in param.type.choices:
                assert tuple(param.type.choices) == OBSERVATION_TYPES, (name, param.name)
                seen.append(name)
    assert {"search", "list"} <= set(seen)


def test_the_mcp_tools_offer_the_same_types(project):
    from helpers import list_tools

    tools = {t.name: t.inputSchema for t in list_tools(project)}
    search = tools["search_memory"]["properties"]["observation_type"]
    assert [s for s in search["anyOf"] if "enum" in s][0]["enum"] == list(OBSERVATION_TYPES)
    assert tools["save_observation"]["properties"]["observation_type"]["enum"] == list(HAND_MADE_TYPES)


def test_save_observation_takes_each_hand_made_type_and_no_other(project):
    from kirolearn.pipeline import summaries
    from kirolearn.store.sqlite import db as store

    db = store.open_db()
    here = summaries.Project(str(project))
    for kind in HAND_MADE_TYPES:
        record = summaries.save_observation(
            as_store(db),
            here,
            title=f"a {kind}",
            summary="s",
            observation_type=kind,
            facts=[],
            concepts=[],
            files_touched=[],
        )
        assert record.observation_type == kind
    with pytest.raises(summaries.SummaryError, match="must be one of " + ", ".join(HAND_MADE_TYPES)):
        summaries.save_observation(
            as_store(db),
            here,
            title="t",
            summary="s",
            observation_type="session_summary",
            facts=[],
            concepts=[],
            files_touched=[],
        )


def _type_lists(tree):
    """Tuples, lists, sets and subscripts (Literal[...]) that spell three or more observation types."""
    for node in ast.walk(tree):
        items = None
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        if items is None:
            continue
        names = [e.value for e in items if isinstance(e, ast.Constant) and e.value in OBSERVATION_TYPES]
        if len(names) >= 3:
            yield node.lineno, names


def test_no_module_writes_the_types_out_again():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (
            path.name == "observation_types.py" or path.parent.name == "privacy"
        ):  # secret-rule keywords: other words
            continue
        for line, names in _type_lists(ast.parse(path.read_text("utf-8"))):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line} {names}")
    assert found == [], "derive these from kirolearn.core.observation_types"


# --- the limits of a record ------------------------------------------------------------------------------


def test_the_mcp_save_observation_limits_are_the_records(project):
    from helpers import list_tools

    props = {t.name: t.inputSchema for t in list_tools(project)}["save_observation"]["properties"]
    assert props["title"]["maxLength"] == schema.TITLE_MAX
    assert props["summary"]["maxLength"] == schema.SUMMARY_MAX
    for name, item_max, count_max in (
        ("facts", schema.FACT_MAX, schema.FACTS_COUNT_MAX),
        ("concepts", schema.CONCEPT_MAX, schema.CONCEPTS_COUNT_MAX),
        ("files_touched", schema.FILE_MAX, schema.FILES_KEPT),
    ):
        assert (props[name]["items"]["maxLength"], props[name]["maxItems"]) == (item_max, count_max), name


def test_the_record_model_holds_what_the_writers_clip_to():
    fields = schema.MemoryRecord.model_fields
    limits = {
        name: [m.max_length for m in fields[name].metadata if hasattr(m, "max_length")]
        for name in ("facts", "concepts", "files_touched")
    }
    assert limits == {
        "facts": [schema.FACTS_COUNT_MAX],
        "concepts": [schema.CONCEPTS_COUNT_MAX],
        "files_touched": [schema.FILES_COUNT_MAX],
    }
    assert schema.FILES_KEPT <= schema.FILES_COUNT_MAX


# --- timestamps ------------------------------------------------------------------------------------------


def test_timestamps_have_one_format_and_sort_as_text():
    from kirolearn.capture import events
    from kirolearn.store import state
    from kirolearn.store.sqlite import db as store

    stamps = [events.utc_iso(1_800_000_000.5), store.now_iso(), state.utc_now(), isotime.now_iso()]
    for stamp in stamps:
        assert len(stamp) == 24 and stamp.endswith("Z") and stamp[19] == "."
    assert events.utc_iso(1_800_000_000.5) == "2027-01-15T08:00:00.500Z"
    for t in (
        1_800_000_000.0,
        1_800_000_000.0005,
        1_800_000_000.9994,
        1_800_000_000.99951,
        1_799_999_999.999999,
    ):
        assert 0 <= t - isotime.parse(isotime.utc_iso(t)).timestamp() < 0.0011, t  # seconds and ms agree
    assert store.iso_shift("2027-01-15T08:00:00.500Z", 0.6) == "2027-01-15T08:00:01.100Z"
    # one second apart, or one millisecond: text order is time order
    ordered = ["2027-01-15T08:00:00.999Z", "2027-01-15T08:00:01.000Z", "2027-01-15T08:00:01.001Z"]
    assert sorted(reversed(ordered)) == ordered
    # what older stores and exports hold, normalised
    assert isotime.normalize("2027-01-15T08:00:01Z") == "2027-01-15T08:00:01.000Z"
    assert isotime.normalize("2027-01-15T09:00:01.5+01:00") == "2027-01-15T08:00:01.500Z"
    assert isotime.normalize("2027-01-15") == "2027-01-15T00:00:00.000Z"
    with pytest.raises(ValueError):
        isotime.normalize("yesterday")


def _summary(sid, ended_at):
    return {
        "id": sid * 8,
        "session_id": sid,
        "project": "general",
        "project_id": "p1",
        "summary": f"ended {sid}",
        "ended_at": ended_at,
    }


def test_session_ends_stored_to_the_second_are_migrated_and_sort_right(home):
    from kirolearn.store.sqlite import db as store
    from kirolearn.store.sqlite import migrations

    db = store.open_db()
    with store.writing(db):
        store.insert_session_summary(db, _summary("old", "2026-09-24T18:02:11Z"))  # as before one format
        store.insert_session_summary(db, _summary("new", "2026-09-24T18:02:11.500Z"))
    db.execute("delete from _sqlite_migrations where name = 'm018_session_end_milliseconds'")
    db.conn.commit()
    migrations.migrations.apply(db)
    rows = [
        tuple(r)
        for r in db.execute("select session_id, ended_at from session_summaries order by ended_at desc")
    ]
    assert rows == [("new", "2026-09-24T18:02:11.500Z"), ("old", "2026-09-24T18:02:11.000Z")]


def test_an_older_export_s_session_end_is_imported_in_the_one_format(home):
    import io
    import json

    from kirolearn import Memory
    from kirolearn.store.sqlite import db as store

    line = json.dumps(dict(_summary("s1", "2026-09-24T18:02:11Z"), type="summary"))
    assert Memory().import_(io.StringIO(line + "\n"))["summaries"]["added"] == 1
    (stamp,) = store.open_db().execute("select ended_at from session_summaries").fetchone()
    assert stamp == "2026-09-24T18:02:11.000Z"


def test_session_end_reports_the_seeds_shape_and_stores_milliseconds(project):
    """The seed shows `"ended_at": "2026-09-24T18:02:11Z"`; the store keeps the one sortable format."""
    import re

    from kirolearn import Memory
    from kirolearn.store.sqlite import db as store

    ended = Memory().end_session("s1", summary="done", project=project)["ended_at"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", ended)
    (stamp,) = store.open_db().execute("select ended_at from session_summaries").fetchone()
    assert isotime.normalize(stamp) == stamp and isotime.to_seconds(stamp) == ended
    assert Memory().init_session(project=project)["ended_at"] == ended


def test_the_hook_reads_recall_settings_with_the_same_defaults_and_cap():
    from kirolearn import settings
    from kirolearn.recall import context

    defaults = settings.Settings().recall.model_dump()
    assert defaults == {k: context.DEFAULTS[k] for k in defaults} and set(defaults) == set(context.DEFAULTS)
    assert context.settings() == dict(context.DEFAULTS, scrub_extra={}, scrub_allow=[])  # no config.toml here
    cap = [m.le for m in settings.Recall.model_fields["budget_tokens"].metadata if hasattr(m, "le")]
    assert cap == [context.MAX_BUDGET_TOKENS]


def test_the_hook_never_writes_an_event_the_spool_would_refuse():
    from kirolearn.capture import events, spool

    assert events.MAX_EVENT_BYTES == spool.MAX_ENTRY_BYTES


def test_the_cli_and_the_mcp_server_share_their_bounds(project):
    from helpers import list_tools

    from kirolearn.cli.commands import cli
    from kirolearn.recall import lexical

    (limit,) = [p for p in cli.commands["search"].params if p.name == "limit"]
    assert limit.type.max == lexical.SEARCH_LIMIT_MAX
    tools = {t.name: t.inputSchema["properties"] for t in list_tools(project)}
    assert tools["search_memory"]["limit"]["maximum"] == lexical.SEARCH_LIMIT_MAX
    assert tools["forget_memory"]["reason"]["maxLength"] == schema.FORGET_REASON_MAX
    assert tools["forget_memory"]["record_id"]["pattern"] == schema.RECORD_ID_PATTERN
