"""`kirolearn doctor` against a real PostgreSQL team store (tests/pgserver.py)."""

import json
import sys
import urllib.parse

import pytest
from click.testing import CliRunner

from kirolearn.cli import cli
from kirolearn.errors import StoreError
from kirolearn.store import pgprobe
from pgserver import pg_database, pg_server  # noqa: F401  (fixtures)


def doctor(monkeypatch, url):
    monkeypatch.setenv("KIROLEARN_STORE_URL", url)
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    checks = json.loads(result.output)["checks"]
    return result.exit_code, [c for c in checks if "team store" in c["message"] or "pgvector" in c["message"]
                              or "your role" in c["message"] or "no project is shared" in c["message"]]


def with_params(url, **params):
    base, query = url.split("?", 1)
    merged = dict(urllib.parse.parse_qsl(query))
    merged.update(params)
    return f"{base}?{urllib.parse.urlencode(merged)}"


def test_probe_reports_the_server(pg_database):
    facts = pgprobe.probe(pg_database)
    assert facts["server_version_num"] >= 150000
    assert facts["user"] == "postgres" and facts["database"].startswith("test_team_server")
    assert facts["can_create_tables"] is True and facts["read_only_replica"] is False
    assert facts["pgvector_installed"] is False  # not packaged for Debian 12's PostgreSQL 15


def test_doctor_checks_a_reachable_team_store(pg_database, monkeypatch):
    _, checks = doctor(monkeypatch, pg_database)
    assert any(c["level"] == "OK" and "reachable: PostgreSQL 1" in c["message"] for c in checks), checks
    assert any("vectors are ranked on this machine" in c["message"] for c in checks)
    assert any(c["level"] == "WARN" and "no project is shared" in c["message"] for c in checks)
    assert not [c for c in checks if c["level"] == "FAIL"]


def test_doctor_names_a_missing_database(pg_server, monkeypatch):
    code, checks = doctor(monkeypatch, pg_server.url("no_such_db"))
    assert code == 1
    (fail,) = [c for c in checks if c["level"] == "FAIL"]
    assert 'database "no_such_db" does not exist' in fail["message"] and "[store] url" in fail["message"]


def test_doctor_says_the_server_is_not_reachable(tmp_path, monkeypatch):
    url = "postgresql:///kirolearn?" + urllib.parse.urlencode({"host": str(tmp_path), "port": "5999"})
    code, checks = doctor(monkeypatch, url)
    assert code == 1
    (fail,) = [c for c in checks if c["level"] == "FAIL"]
    assert "cannot connect to the team store" in fail["message"] and "not reachable" in fail["message"]
    assert "the spool and the local store keep working" in fail["message"]


def test_a_role_without_connect_privilege_is_told_whom_to_ask(pg_server, pg_database, monkeypatch):
    dbname = urllib.parse.urlsplit(pg_database).path.lstrip("/")
    with pg_server.connect() as conn:
        conn.execute("create role outsider login")
        conn.execute(f'revoke connect on database "{dbname}" from public')
    try:
        with pytest.raises(StoreError) as info:
            pgprobe.probe(with_params(pg_database, user="outsider"))
        assert "permission denied" in str(info.value) and "grant your role CONNECT" in str(info.value)
    finally:
        with pg_server.connect() as conn:
            conn.execute(f'grant connect on database "{dbname}" to public')
            conn.execute("drop role outsider")


def test_without_psycopg_the_fix_is_the_team_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreError) as info:
        pgprobe.connect("postgresql:///x")
    assert "psycopg is not installed" in str(info.value) and "kirolearn[team]" in str(info.value)
