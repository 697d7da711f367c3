"""The MCP server through a real MCP client session (in memory), plus one real stdio subprocess."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from helpers import TURN, call, list_tools, text

import kirolearn
from kirolearn import Memory, __version__, settings
from kirolearn.cli.commands import cli
from kirolearn.pipeline import summaries
from kirolearn.pipeline.extract import Completion

pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")


def test_tools_schemas_and_annotations(project):
    tools = {t.name: t for t in list_tools(project)}
    assert set(tools) == {
        "save_session_summary",
        "session_end",
        "session_init",
        "search_memory",
        "save_observation",
        "forget_memory",
        "get_memory",
    }
    s = tools["save_session_summary"].inputSchema
    assert sorted(s["required"]) == sorted(TURN)
    assert s["properties"]["files_read"]["type"] == "array"
    e = tools["session_end"].inputSchema
    assert e["required"] == ["session_id"]
    assert (
        e["properties"]["project"]["default"] == "general"
        and e["properties"]["auto_compress"]["default"] is False
    )
    assert set(e["properties"]) == {
        "session_id",
        "summary",
        "highlights",
        "pitfalls",
        "next_steps",
        "open_questions",
        "project",
        "auto_compress",
        "transcript",
    }
    assert tools["search_memory"].annotations.readOnlyHint is True
    assert tools["session_init"].annotations.readOnlyHint is True
    assert tools["save_observation"].annotations.destructiveHint is False
    assert tools["save_observation"].inputSchema["properties"]["observation_type"]["enum"] == [
        "tool_use",
        "decision",
        "error",
        "discovery",
        "pattern",
    ]
    assert "resume cleanly" in tools["session_end"].description
    assert all(t.outputSchema for t in tools.values())


def test_save_session_summary_builds_the_seed_record(project):
    result = call(project, "save_session_summary", TURN)
    assert not result.isError
    record_id = result.structuredContent["record_id"]
    assert text(result) == f"Saved turn summary {record_id}"
    (hit,) = Memory().search("plus-sign login", project=project)
    assert hit.record_id == record_id and hit.observation_type == "session_summary"
    assert hit.strategy == "mcp_session_summary" and hit.concepts == []
    assert hit.files_touched == ["app/auth.py", "tests/test_auth.py"]  # union, de-duplicated
    assert hit.summary == (
        "## What was investigated\napp/auth.py find_user\n\n## What was learned\n"
        "find_user formats SQL with %\n\n## What was completed\nParameterised the query\n\n"
        "## Next steps\nFix app/orders.py the same way"
    )


def test_turn_summary_limits_are_exact():
    def md(n):
        return summaries.turn_summary_markdown("i" * n, "l" * n, "c" * n, "n" * n)

    fits = summaries.turn_summary_markdown("a", "b", "c", "d" * (4000 - len(md(0)) - 3))
    assert len(fits) == 4000 and "[truncated]" not in fits
    over = summaries.turn_summary_markdown("a", "b", "c", "d" * (4000 - len(md(0)) - 2))
    assert over.endswith("## What was completed\nc\n\n[truncated]") and "Next steps" not in over
    two = summaries.turn_summary_markdown("i" * 1000, "l" * 2900, "c" * 100, "n")
    assert two.endswith("l\n\n[truncated]") and "What was completed" not in two and len(two) <= 4000
    huge = summaries.turn_summary_markdown("i" * 9000, "l", "c", "n")
    assert len(huge) == 4000 and huge.endswith("i\n\n[truncated]")


def test_title_is_the_request_cut_to_200(project):
    long_request = "x" * 250
    result = call(project, "save_session_summary", dict(TURN, request=long_request))
    assert result.structuredContent["title"] == "x" * 200


@pytest.mark.parametrize(
    "args, message",
    [
        (dict(TURN, request="   "), "'request' must not be empty"),
        (dict(TURN, learned="x" * 10_000_000), "'learned' must be at most 100,000 characters"),
        ({k: v for k, v in TURN.items() if k != "completed"}, "completed"),
        (dict(TURN, files_read="app/auth.py"), "files_read"),
    ],
)
def test_bad_input_is_an_error_result_not_a_crash(project, args, message):
    result = call(project, "save_session_summary", args)
    assert result.isError
    assert message in text(result)


def test_secrets_are_scrubbed_on_every_tool(project):
    key = "ghp_" + "Zq9" * 12
    call(
        project,
        "save_session_summary",
        dict(TURN, learned=f"the token was {key} <private>home addr</private>", files_read=[f"/tmp/{key}"]),
    )
    call(
        project,
        "save_observation",
        {
            "title": f"token {key}",
            "summary": f"key {key}",
            "observation_type": "decision",
            "facts": [key],
            "concepts": [],
            "files_touched": [],
        },
    )
    call(
        project,
        "session_end",
        {"session_id": "s1", "summary": f"used {key}", "pitfalls": [f"never log {key}"]},
    )
    from kirolearn.store.sqlite import db as store

    db = store.open_db()
    dump = "\n".join(
        str(tuple(r))
        for t in ("memory_records", "session_summaries")
        for r in db.execute(f"select * from {t}")
    )
    assert key not in dump and "home addr" not in dump and "[REDACTED:github-token]" in dump


def test_session_end_then_session_init_and_session_start(project):
    args = {
        "session_id": "sess-2026-09-24-a",
        "project": "my-api",
        "summary": "Moved JWT validation into middleware and fixed refresh-token expiry.",
        "pitfalls": ["Refresh tokens are stored in UTC; do not compare with local time"],
        "next_steps": ["Add rate limiting to /auth/refresh"],
        "open_questions": ["Rotate signing keys?"],
    }
    result = call(project, "session_end", args)
    assert not result.isError
    shape = result.structuredContent
    assert set(shape) == {"id", "session_id", "project", "ended_at", "summary_len", "next_steps_count"}
    assert (shape["project"], shape["summary_len"], shape["next_steps_count"]) == ("my-api", 68, 1)
    assert len(shape["id"]) == 32 and shape["ended_at"].endswith("Z")
    assert json.loads(text(result)) == shape

    for _ in range(2):  # not consumed: a crash-restarted session sees it again
        init = call(project, "session_init", {"project": "my-api"}).structuredContent
        assert init["found"] is True and init["next_steps"] == ["Add rate limiting to /auth/refresh"]
        assert init["open_questions"] == ["Rotate signing keys?"] and init["summary"] == args["summary"]
    assert call(project, "session_init", {}).structuredContent["found"] is False  # "general" has none
    unknown = call(project, "session_init", {"project": "nope"})  # a label never used: not an error
    assert not unknown.isError and unknown.structuredContent["found"] is False
    assert unknown.structuredContent["known_projects"] == ["my-api"] and "my-api" in text(unknown)

    block = Memory().context(project=project)
    assert block.index("Last session ended") < block.index("Next steps:") < block.index("Add rate limiting")
    assert "Open questions:" in block
    # and it is a searchable memory record too
    assert Memory().search("JWT middleware", project=project)[0].strategy == "mcp_session_end"


def test_session_end_needs_a_summary_unless_auto_compress(project):
    result = call(project, "session_end", {"session_id": "s"})
    assert result.isError and "'summary' is required unless auto_compress is true" in text(result)


def _conf(model="openai/fake"):
    s = settings.Settings()
    s.extract.model = model
    return s


def test_auto_compress_fills_only_the_gaps(project):
    def complete(messages, conf, response_format=None):
        assert "we fixed the cache" in messages[1]["content"]
        return Completion(
            json.dumps(
                {
                    "summary": "Drafted summary.",
                    "next_steps": ["drafted step"],
                    "pitfalls": ["drafted pitfall"],
                }
            ),
            30,
            10,
        )

    result = call(
        project,
        "session_end",
        {
            "session_id": "s",
            "auto_compress": True,
            "pitfalls": ["mine"],
            "transcript": "user: we fixed the cache",
        },
        settings=_conf(),
        complete=complete,
    )
    shape = result.structuredContent
    assert (
        shape["auto_compress"] is True
        and shape["compressed_used"] is True
        and "auto_compress_error" not in shape
    )
    init = call(project, "session_init", {}).structuredContent
    assert init["summary"] == "Drafted summary." and init["next_steps"] == ["drafted step"]
    assert init["pitfalls"] == ["mine"]  # explicit arguments win


@pytest.mark.parametrize(
    "answer, error",
    [
        ("this is not json", "malformed_json"),
        (RuntimeError("connection refused"), "provider_unavailable"),
    ],
)
def test_auto_compress_failures_still_save(project, answer, error):
    def complete(messages, conf, response_format=None):
        if isinstance(answer, Exception):
            raise answer
        return Completion(answer, 5, 5)

    result = call(
        project,
        "session_end",
        {"session_id": "s", "auto_compress": True, "transcript": "t"},
        settings=_conf(),
        complete=complete,
    )
    assert not result.isError
    assert result.structuredContent["auto_compress_error"] == error
    assert result.structuredContent["compressed_used"] is False
    assert call(project, "session_init", {}).structuredContent["found"] is True


def test_auto_compress_without_a_model_or_context(project):
    r = call(
        project,
        "session_end",
        {"session_id": "s", "auto_compress": True, "transcript": "x"},
        settings=_conf(""),
    )
    assert r.structuredContent["auto_compress_error"] == "provider_unavailable"
    r = call(project, "session_end", {"session_id": "empty", "auto_compress": True}, settings=_conf())
    assert r.structuredContent["auto_compress_error"] == "empty_context"


def test_auto_compress_through_litellm_with_a_mock_model(project):
    import litellm

    class Fake(litellm.CustomLLM):
        def completion(self, *args, **kwargs):
            return litellm.completion(
                model="gpt-4o-mini",
                messages=kwargs["messages"],
                mock_response=json.dumps({"summary": "Mock summary.", "next_steps": ["a"], "pitfalls": []}),
            )

    before = litellm.custom_provider_map
    litellm.custom_provider_map = [{"provider": "kirofake", "custom_handler": Fake()}]
    try:
        r = call(
            project,
            "session_end",
            {"session_id": "s", "auto_compress": True, "transcript": "did things"},
            settings=_conf("kirofake/x"),
        )
    finally:
        litellm.custom_provider_map = before
    assert r.structuredContent["compressed_used"] is True
    assert call(project, "session_init", {}).structuredContent["summary"] == "Mock summary."


def test_search_memory_and_save_observation(project):
    empty = call(project, "search_memory", {"query": "anything"})
    assert text(empty) == f"No matching memories found in project {project}."
    saved = call(
        project,
        "save_observation",
        {
            "title": "Use WAL for the export job",
            "summary": "busy timeout 30",
            "observation_type": "decision",
            "facts": ["timeout=30"],
            "concepts": ["sqlite"],
            "files_touched": ["scripts/export.py"],
        },
    )
    assert text(saved).startswith("Saved observation mr_")
    found = call(project, "search_memory", {"query": "export WAL", "limit": 100})
    rid, day = (
        found.structuredContent["results"][0]["record_id"],
        found.structuredContent["results"][0]["created_at"][:10],
    )
    assert text(found) == (
        f"### Use WAL for the export job\n({rid}, decision, {day})\n\n> busy timeout 30\n"
        "Concepts: sqlite\nFiles:\n  scripts/export.py"
    )
    assert call(project, "search_memory", {"query": "export WAL", "limit": 500}).isError
    assert found.structuredContent["results"][0]["observation_type"] == "decision"
    bad = call(
        project,
        "save_observation",
        {
            "title": "t",
            "summary": "s",
            "observation_type": "session_summary",
            "facts": [],
            "concepts": [],
            "files_touched": [],
        },
    )
    assert bad.isError


@pytest.mark.slow
def test_stdio_subprocess_initialize_list_call(project, home):
    env = dict(os.environ, KIROLEARN_PROJECT=str(project / "src"))
    proc = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "kirolearn-mcp")],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "save_session_summary", "arguments": TURN},
        },
    ]
    replies = {}
    try:
        for message in messages:
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()
            if "id" not in message:
                continue
            while message["id"] not in replies:  # stdout carries only protocol lines
                line = proc.stdout.readline()
                assert line, proc.stderr.read().decode()[-2000:]
                reply = json.loads(line)
                replies[reply.get("id")] = reply
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=20)  # the server exits when the client hangs up
        finally:
            proc.kill()
    assert proc.returncode == 0
    assert replies[1]["result"]["serverInfo"] == {"name": "kirolearn", "version": kirolearn.__version__}
    assert len(replies[2]["result"]["tools"]) == 7  # get_memory (#24) beside the six
    assert replies[3]["result"]["content"][0]["text"].startswith("Saved turn summary mr_")
    hit = Memory().search("plus-sign login", all_projects=True)[0]
    assert hit.project_root == str(project)  # marker walk from the subdirectory Kiro started us in


@pytest.mark.parametrize(
    "setup, error",
    [
        ({"model": "kirofake/x", "mock": "not json at all"}, "malformed_json"),
        ({"model": "openai/x", "api_base": "http://127.0.0.1:9/v1"}, "provider_unavailable"),
    ],
)
def test_auto_compress_failures_through_litellm(project, setup, error, monkeypatch):
    import litellm

    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-tests")

    class Fake(litellm.CustomLLM):
        def completion(self, *args, **kwargs):
            return litellm.completion(
                model="gpt-4o-mini", messages=kwargs["messages"], mock_response=setup["mock"]
            )

    conf = _conf(setup["model"])
    conf.extract.api_base = setup.get("api_base", "")
    conf.extract.timeout_seconds = 2
    before = litellm.custom_provider_map
    litellm.custom_provider_map = [{"provider": "kirofake", "custom_handler": Fake()}]
    try:
        r = call(
            project,
            "session_end",
            {"session_id": "s", "auto_compress": True, "transcript": "t"},
            settings=conf,
        )
    finally:
        litellm.custom_provider_map = before
    assert not r.isError and r.structuredContent["auto_compress_error"] == error


# A summary of only spaces is no summary (kills the mutant `not summary` instead of `.strip()`).
@pytest.mark.parametrize("blank", ["   ", "\n\t  \n"])
def test_session_end_rejects_a_summary_of_only_whitespace(project, blank):
    result = call(project, "session_end", {"session_id": "s", "summary": blank})
    assert result.isError and "'summary' is required unless auto_compress is true" in text(result)
    assert call(project, "session_init", {}).structuredContent["found"] is False  # nothing was stored


# MCP error results are scrubbed (kills the mutant that removed the scrub on error results).
KEY = "ghp_" + "Zq9" * 12


@pytest.mark.parametrize(
    "tool, args, quoted",
    [
        (
            "session_end",
            {"session_id": "s", "summary": "x", "auto_compress": KEY},
            False,
        ),  # wrong types: named,
        (
            "save_observation",
            {
                "title": "t",
                "summary": "s",
                "observation_type": KEY,
                "facts": [],
                "concepts": [],
                "files_touched": [],
            },
            False,
        ),  # not quoted
        ("search_memory", {"query": "q", "limit": KEY}, False),
        (KEY, {}, True),  # an unknown tool, named by the secret: quoted, so scrubbed
    ],
)
def test_mcp_error_results_never_quote_a_secret(project, tool, args, quoted):
    result = call(project, tool, args)
    assert result.isError
    assert KEY not in text(result)
    assert ("[REDACTED" in text(result)) is quoted


def test_a_library_error_naming_a_secret_path_is_scrubbed_too(project, tmp_path, monkeypatch):
    """Errors the tools raise themselves (KirolearnError) pass the same scrub as validation errors."""
    home = tmp_path / KEY
    home.mkdir()
    (home / "config.toml").write_text('[extract]\ndaily_token_limit = "lots"\n')
    monkeypatch.setenv("KIROLEARN_HOME", str(home))
    result = call(project, "session_end", {"session_id": "s", "summary": "x"})
    assert result.isError and "invalid setting 'extract.daily_token_limit'" in text(result)
    assert KEY not in text(result) and "[REDACTED" in text(result)


SEED_SESSION_END_DESCRIPTION = (
    "End-of-session capture: summary + highlights + pitfalls + next_steps so the next session can resume cleanly. "
    "Set auto_compress=true to have the LLM generate the missing summary/next_steps/pitfalls from stored session "
    "artifacts (or from an optional `transcript`)."
)


def _no_model():
    from kirolearn import settings

    return settings.Settings()


def test_failed_auto_compress_stores_an_empty_summary_and_keeps_the_previous_one(project):
    first = call(
        project,
        "session_end",
        {
            "session_id": "s-1",
            "summary": "Moved JWT checks into middleware.",
            "next_steps": ["Rate-limit /auth/refresh"],
        },
    )
    assert not first.isError
    failed = call(
        project,
        "session_end",
        {"session_id": "s-2", "auto_compress": True, "transcript": "worked"},
        settings=_no_model(),
    )
    shape = failed.structuredContent
    assert shape["summary_len"] == 0 and shape["auto_compress_error"] == "provider_unavailable"
    assert shape["compressed_used"] is False and shape["next_steps_count"] == 0

    from kirolearn.store.sqlite import db as store

    db = store.open_db()
    (row,) = db.query("select summary, record_id from session_summaries where session_id = 's-2'")
    assert row == {"summary": "", "record_id": None}  # the seed's empty summary; no placeholder record
    assert not Memory().search("no summary was written auto_compress", project=project)

    init = call(project, "session_init", {}).structuredContent
    # one saved row, the newest, as session_end saved it (#24); the earlier summary rides along whole
    assert (
        init["found"] and init["session_id"] == "s-2" and init["summary"] == "" and init["next_steps"] == []
    )
    assert init["previous"]["session_id"] == "s-1"
    assert init["previous"]["summary"] == "Moved JWT checks into middleware."
    assert init["previous"]["next_steps"] == ["Rate-limit /auth/refresh"]
    assert init["ended_without_summary"] == [
        {"session_id": "s-2", "ended_at": shape["ended_at"], "auto_compress_error": "provider_unavailable"}
    ]
    block = Memory().context(project=project)
    assert "Moved JWT checks into middleware." in block and "Rate-limit /auth/refresh" in block
    assert "Since then session s-2 ended without a summary (auto_compress: provider_unavailable)." in block


def test_a_later_session_s_next_steps_replace_the_carried_ones(project):
    call(project, "session_end", {"session_id": "s-1", "summary": "Done A.", "next_steps": ["old step"]})
    call(
        project,
        "session_end",
        {"session_id": "s-2", "auto_compress": True, "next_steps": ["new step"]},
        settings=_no_model(),
    )
    init = call(project, "session_init", {}).structuredContent
    # never fields of two rows (#24): the newest row's own next steps, the older row whole beside it
    assert init["session_id"] == "s-2" and init["summary"] == "" and init["next_steps"] == ["new step"]
    assert init["previous"]["summary"] == "Done A." and init["previous"]["next_steps"] == ["old step"]
    call(project, "session_end", {"session_id": "s-3", "summary": "Done B."})
    init = call(project, "session_init", {}).structuredContent
    assert init["summary"] == "Done B." and init["ended_without_summary"] == [] and "previous" not in init
    assert init["next_steps"] == []


def test_only_empty_summaries_so_far_is_found_with_an_empty_summary(project):
    call(
        project,
        "session_end",
        {"session_id": "s-1", "auto_compress": True, "pitfalls": ["UTC"]},
        settings=_no_model(),
    )
    init = call(project, "session_init", {}).structuredContent
    assert init["found"] and init["summary"] == "" and init["pitfalls"] == ["UTC"]
    block = Memory().context(project=project)
    assert "Last session ended without a summary" in block and "UTC" in block


def test_session_init_with_a_new_label_on_a_fresh_project_is_not_an_error(project):
    fresh = call(project, "session_init", {"project": "my-api"})
    assert not fresh.isError
    assert fresh.structuredContent["found"] is False and fresh.structuredContent["known_projects"] == []
    cli_out = CliRunner().invoke(
        cli, ["session-init", "--label", "my-api", "--json", "--project", str(project)]
    )
    assert cli_out.exit_code == 0 and json.loads(cli_out.output)["found"] is False


def test_files_touched_is_the_whole_union_modified_first(project):
    read = [f"src/read_{i}.py" for i in range(150)]
    modified = [f"src/changed_{i}.py" for i in range(10)] + ["src/read_0.py"]
    result = call(project, "save_session_summary", dict(TURN, files_read=read, files_modified=modified))
    assert not result.isError
    (hit,) = Memory().search("plus-sign login", project=project)
    assert len(hit.files_touched) == 160
    assert hit.files_touched[:11] == modified and set(read) <= set(hit.files_touched)


def test_auto_compress_fills_only_absent_values(project):
    from kirolearn.pipeline.extract import Completion

    def complete(messages, conf, response_format=None):
        return Completion(
            json.dumps({"summary": "Drafted.", "next_steps": ["drafted"], "pitfalls": ["drafted"]})
        )

    conf = _no_model()
    conf.extract.model = "openai/fake"
    shape = call(
        project,
        "session_end",
        {"session_id": "s", "auto_compress": True, "next_steps": [], "transcript": "log"},
        settings=conf,
        complete=complete,
    ).structuredContent
    assert shape["next_steps_count"] == 0 and shape["compressed_used"] is True
    init = call(project, "session_init", {}).structuredContent
    assert init["next_steps"] == [] and init["pitfalls"] == ["drafted"]


def test_session_end_description_is_the_seed_s_byte_for_byte(project):
    tools = {t.name: t for t in list_tools(project)}
    assert tools["session_end"].description == SEED_SESSION_END_DESCRIPTION


def test_tool_schemas_hold_the_limits_and_descriptions_are_dedented(project):
    tools = {t.name: t for t in list_tools(project)}
    obs = tools["save_observation"].inputSchema["properties"]
    assert (obs["title"]["minLength"], obs["title"]["maxLength"]) == (1, 200)
    assert obs["summary"]["maxLength"] == 4000 and obs["facts"]["maxItems"] == 50
    assert obs["facts"]["items"]["maxLength"] == 500 and obs["files_touched"]["maxItems"] == 100
    turn = tools["save_session_summary"].inputSchema["properties"]
    assert turn["files_read"]["maxItems"] == 200 and turn["request"]["maxLength"] == 100_000
    for tool in tools.values():
        assert "\n    " not in tool.description, tool.name


@pytest.mark.parametrize(
    "args, message",
    [
        ({"title": 5}, "'title' must be a string, got integer"),
        ({"facts": "one fact"}, "'facts' must be a list, got string"),
        ({"title": "x" * 201}, "'title' must be at most 200 characters"),
    ],
)
def test_wrong_types_get_one_plain_line(project, args, message):
    base = {
        "title": "t",
        "summary": "s",
        "observation_type": "decision",
        "facts": [],
        "concepts": [],
        "files_touched": [],
    }
    result = call(project, "save_observation", dict(base, **args))
    assert result.isError
    assert text(result) == f"invalid arguments for save_observation: {message}"


def test_server_info_reports_kirolearn_s_version(project):
    from kirolearn import mcp_server

    server = mcp_server.build_server(str(project))
    assert server._mcp_server.create_initialization_options().server_version == __version__
