"""config.toml and KIROLEARN_* overrides: defaults, precedence and errors that name the key."""

import pytest

from kirolearn import settings


def test_defaults_without_a_file(home):
    s = settings.load()
    assert s.extract.model == "" and s.batch.max_events == 40 and s.dedup.window_seconds == 3


def test_file_then_environment(write_config, monkeypatch):
    write_config(
        '[extract]\nmodel = "ollama_chat/qwen2.5"\ndaily_token_limit = 5000\n[batch]\nidle_seconds = 10\n'
    )
    s = settings.load()
    assert (s.extract.model, s.extract.daily_token_limit, s.batch.idle_seconds) == (
        "ollama_chat/qwen2.5",
        5000,
        10,
    )
    monkeypatch.setenv("KIROLEARN_MODEL", "bedrock/anthropic.claude-3-haiku")
    monkeypatch.setenv("KIROLEARN_DAILY_TOKEN_LIMIT", "0")
    s = settings.load()
    assert s.extract.model == "bedrock/anthropic.claude-3-haiku" and s.extract.daily_token_limit == 0


@pytest.mark.parametrize(
    "text, message",
    [
        ("[extract]\nmodle = 'x'\n", "unknown setting 'extract.modle'; did you mean 'extract.model'?"),
        ("[batchh]\n", "unknown setting 'batchh'; did you mean 'batch'?"),
        ("[recall]\nbudget = 10\n", "unknown setting 'recall.budget'; did you mean 'recall.budget_tokens'?"),
        (
            "[recall]\nxyz = 1\n",
            "unknown setting 'recall.xyz'; valid keys here: budget_tokens, prompt_records",
        ),
        ("[drain]\nchunk_size = -1\n", "invalid setting 'drain.chunk_size': must be at least 1 (got -1)"),
        ("[drain]\nchunk_size = 'many'\n", "invalid setting 'drain.chunk_size': must be a whole number"),
        ("[scrub]\nallow = 'x'\n", "invalid setting 'scrub.allow': must be a list"),
        (
            "[recall]\nbudget_tokens = 5000\n",
            "invalid setting 'recall.budget_tokens': must be at most 2400 (got 5000)",
        ),
        ("[extract\n", "not valid TOML"),
        (
            "[scrub.extra_patterns]\nbad = '([a-z'\n",
            "invalid setting 'scrub.extra_patterns': 'bad': invalid regex '([a-z': unterminated character set",
        ),
        (
            "[scrub.extra_patterns]\n'my key' = 'x'\n",
            "invalid setting 'scrub.extra_patterns': type name 'my key'",
        ),
    ],
)
def test_errors_name_the_file_and_key(write_config, home, text, message):
    write_config(text)
    with pytest.raises(settings.SettingsError) as info:
        settings.load()
    assert message in str(info.value)
    assert str(home / "config.toml") in str(info.value)
    assert "Extra inputs" not in str(info.value) and "pydantic" not in str(info.value)


def test_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("KIROLEARN_DAILY_TOKEN_LIMIT", "lots")
    with pytest.raises(
        settings.SettingsError,
        match=r"\$KIROLEARN_DAILY_TOKEN_LIMIT: invalid setting 'extract.daily_token_limit'",
    ):
        settings.load()


def test_every_setting_is_documented_in_the_docs():
    import pathlib

    readme = (pathlib.Path(__file__).parent.parent / "docs" / "configuration.md").read_text("utf-8")
    for table, section in settings.Settings.model_fields.items():
        for key in section.annotation.model_fields:
            assert f"`{table}.{key}`" in readme, f"{table}.{key} missing from docs/configuration.md"


def test_the_hooks_recall_defaults_match_the_settings_model(write_config):
    from kirolearn.recall import context

    assert context.DEFAULTS == settings.Recall().model_dump()
    write_config("[recall]\nbudget_tokens = 300\nprompt_records = 2\n")
    assert context.settings()["budget_tokens"] == 300 == settings.load().recall.budget_tokens
