"""Effective settings: defaults < $KIROLEARN_HOME/config.toml < KIROLEARN_* variables.

Off the hook path (pydantic). A wrong key or value is a `SettingsError` naming
the key, the file and what is allowed, never a silent default. (The hook cannot
afford pydantic: kirolearn.core.configfile.hook_view() reads [recall] with tomllib and skips a
value it cannot use; `kirolearn config show` and every other command report it.)
"""

import os

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kirolearn.core import configfile, limits
from kirolearn.core.errors import ConfigError


class SettingsError(ConfigError):
    """config.toml or a KIROLEARN_* variable holds something invalid."""


class _Section(BaseModel):
    # no inf or nan: an infinite spend limit or wait is a typo, not a setting
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class Extract(_Section):
    """How batches become memory records."""

    model: str = Field(
        "",
        description="litellm model string, e.g. 'bedrock/…', 'ollama_chat/qwen2.5'; empty = deterministic extractor",
    )
    api_base: str = Field("", description="override the provider's endpoint (e.g. a local Ollama)")
    timeout_seconds: float = Field(
        60.0, gt=0, description="one model call: connect, send and wait for the answer"
    )
    call_budget_seconds: float = Field(
        120.0, gt=0, description="one batch's extraction in all: every call, retry and backoff"
    )
    drain_llm_budget_seconds: float = Field(
        300.0,
        ge=0,
        description="model time of one drain run; later batches wait for the next drain; 0 = no limit",
    )
    breaker_failures: int = Field(
        3,
        ge=1,
        le=100,
        description="failed batches in a row after which a drain stops "
        "calling the model and uses the deterministic extractor",
    )
    retries: int = Field(2, ge=0, le=10, description="retries of a transient LLM error within one attempt")
    retry_backoff_seconds: float = Field(1.0, ge=0, description="first backoff; doubles each retry")
    max_attempts: int = Field(
        3, ge=1, le=20, description="failed LLM attempts on one batch before the deterministic fallback"
    )
    daily_token_limit: int = Field(
        200_000, ge=0, description="prompt+completion tokens per UTC day; 0 = no limit"
    )
    daily_cost_limit_usd: float = Field(
        1.0, ge=0, description="dollars per UTC day by litellm's price map; 0 = no limit"
    )
    max_field_chars: int = Field(
        2_000, ge=100, description="each event field is cut to this before it is sent"
    )
    max_prompt_chars: int = Field(24_000, ge=1_000, description="whole batch rendering sent to the model")
    max_answer_tokens: int = Field(
        2_000,
        ge=0,
        description="longest answer asked of the model (max_tokens); an answer "
        "cut there is a botched batch; 0 = the server's own limit",
    )


class Batch(_Section):
    """When buffered events of one project+session are extracted."""

    max_events: int = Field(40, ge=1, description="extract when a session has this many buffered events")
    idle_seconds: float = Field(
        300.0, ge=0, description="extract a session idle this long even without a stop"
    )


class Dedup(_Section):
    """Content dedup of repeated hook calls."""

    window_seconds: float = Field(
        3.0,
        ge=0,
        description="identical events of one session this close together are "
        "one call seen twice (a hook wired twice fires within ms)",
    )


class Scrub(_Section):
    """Additions to the built-in secret patterns."""

    extra_patterns: dict[str, str] = Field(
        default_factory=dict, description="type name = regex; matches become [REDACTED:<type>]"
    )
    allow: list[str] = Field(default_factory=list, description="literal strings never redacted")
    betterleaks: bool = Field(
        False, description="also run betterleaks (pip install 'kirolearn[scan]') in the drain"
    )

    @field_validator("extra_patterns")
    @classmethod
    def _valid_patterns(cls, value: "dict[str, str]") -> "dict[str, str]":
        """A bad name or regex is a config error here, not an unexpected error in the first scrub."""
        import re

        from kirolearn.core.userpatterns import problem

        for kind, pattern in value.items():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,39}", kind):
                raise ValueError(f"type name {kind!r}: use 1-40 of [A-Za-z0-9_-]")
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"{kind!r}: invalid regex {pattern!r}: {err}") from None
            why = problem(pattern)
            if why:
                raise ValueError(f"{kind!r}: {pattern!r} is refused: {why}")
        return value


class Drain(_Section):
    """The drainer's own pacing."""

    poll_seconds: float = Field(1.0, gt=0, description="--watch: how often the spool is checked")
    chunk_size: int = Field(500, ge=1, le=50_000, description="events stored per transaction")
    lock_wait_seconds: float = Field(
        2.0, ge=0, description="how long a second drainer waits for the lock before giving up"
    )
    auto_merge: bool = Field(
        True,
        description="merge records of identical work (the same commands and arguments, the same "
        "files written with the same claims) as they are stored",
    )
    supersede_model_calls: int = Field(
        0,
        ge=0,
        le=1_000,
        description="no longer used: a supersede needs a changed claim, never a model's verdict "
        "(docs/memory-marks.md); kept so an older config.toml still loads",
    )
    freshness_per_pass: int = Field(
        50,
        ge=0,
        le=10_000,
        description="records whose claims one drain pass "
        "re-checks, the longest unchecked first (0: none; docs/memory-marks.md)",
    )


class Recall(_Section):
    """What the hooks inject (the hook reads this table without pydantic: kirolearn.core.configfile.hook_view)."""

    # The defaults and the cap are the hook's own (kirolearn.core.limits).
    budget_tokens: int = Field(
        limits.DEFAULTS["budget_tokens"],
        ge=0,
        le=limits.MAX_BUDGET_TOKENS,
        description="size cap of a prompt's injected block, estimated at 4 characters a token "
        "(a session start's is twice this); at "
        f"most {limits.MAX_BUDGET_TOKENS:,} because Kiro CLI cuts hook output at 10,240 bytes",
    )
    prompt_records: int = Field(
        limits.DEFAULTS["prompt_records"], ge=0, description="most records injected for one prompt"
    )
    session_start_records: int = Field(
        limits.DEFAULTS["session_start_records"],
        ge=0,
        description="recent notable records shown after the last turn summary",
    )
    time_budget_ms: int = Field(
        limits.DEFAULTS["time_budget_ms"],
        ge=0,
        description="a recall slower than this is abandoned and prints nothing",
    )


class Retention(_Section):
    """How long raw events are kept once memory records were made from them."""

    events_days: float = Field(
        90.0,
        ge=0,
        description="delete extracted events older than this (records keep their "
        "source ids); 0 = keep forever",
    )
    forgotten_days: float = Field(
        30.0,
        ge=0,
        description="forgotten records stay restorable this long, then the "
        "drain purges their bytes; 0 = until `forget --purge`",
    )


class Embeddings(_Section):
    """Vectors for semantic recall, computed by the drainer (`kirolearn reindex` after a change)."""

    model: str = Field(
        "auto",
        description="'auto' (local/all-MiniLM-L6-v2 when its weights are installed: "
        "`kirolearn model install`; else wordllama), 'wordllama/l2_supercat_256' (offline, shipped), "
        "'local/all-MiniLM-L6-v2' (offline: pip install 'kirolearn[model]' and its weights), "
        "'litellm/<provider model>' (e.g. litellm/ollama/nomic-embed-text), or 'none'",
    )
    api_base: str = Field("", description="endpoint for a litellm embedding model (e.g. a local Ollama)")
    model_dir: str = Field(
        "",
        description="folder holding a local/ model's files (model.safetensors, "
        "tokenizer.json, config.json); empty = the Hugging Face cache, then an installed "
        "package that ships them",
    )


class Store(_Section):
    """Where memory is kept: the local SQLite file, or a shared PostgreSQL team store (docs/team.md)."""

    url: str = Field(
        "",
        description="postgresql://[user@]host[:port]/dbname (or postgresql:///?service=NAME) of "
        "a team store; empty = local SQLite only. Never a password: libpq reads it from "
        "~/.pgpass, a service file or PGPASSWORD",
    )

    @field_validator("url")
    @classmethod
    def _valid_url(cls, value: str) -> str:
        from kirolearn.store.url import check_store_url

        try:
            return check_store_url(value)
        except ConfigError as exc:
            # message + fix as one line; never the URL itself
            raise ValueError(str(exc)) from None


class Team(_Section):
    """Who you are in a team store's records (docs/team.md)."""

    actor: str = Field(
        "",
        max_length=128,
        description="your name on the records you share; empty = the OS user that ran the hook",
    )

    @field_validator("actor")
    @classmethod
    def _printable(cls, value: str) -> str:
        value = value.strip()
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ValueError("must be printable text (no control characters)")
        return value


class Settings(_Section):
    """All settings; one attribute per config.toml table."""

    extract: Extract = Field(default_factory=Extract)
    batch: Batch = Field(default_factory=Batch)
    dedup: Dedup = Field(default_factory=Dedup)
    scrub: Scrub = Field(default_factory=Scrub)
    drain: Drain = Field(default_factory=Drain)
    recall: Recall = Field(default_factory=Recall)
    retention: Retention = Field(default_factory=Retention)
    embeddings: Embeddings = Field(default_factory=Embeddings)
    store: Store = Field(default_factory=Store)
    team: Team = Field(default_factory=Team)


# Environment overrides: variable -> (table, key).
ENV_OVERRIDES = {
    "KIROLEARN_MODEL": ("extract", "model"),
    "KIROLEARN_API_BASE": ("extract", "api_base"),
    "KIROLEARN_DAILY_TOKEN_LIMIT": ("extract", "daily_token_limit"),
    "KIROLEARN_DAILY_COST_LIMIT_USD": ("extract", "daily_cost_limit_usd"),
    "KIROLEARN_EMBEDDING_MODEL": ("embeddings", "model"),
    "KIROLEARN_MODEL_DIR": ("embeddings", "model_dir"),
    "KIROLEARN_STORE_URL": ("store", "url"),
    "KIROLEARN_ACTOR": ("team", "actor"),
}


def settings_path() -> str:
    """$KIROLEARN_HOME/config.toml."""
    return configfile.config_path()


def _known_keys(loc: tuple) -> "list[str]":
    """The valid keys at `loc` (a path of table names) of Settings."""
    model = Settings
    for part in loc:
        field = model.model_fields.get(str(part))
        if field is None or not (
            isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
        ):
            return []
        model = field.annotation
    return list(model.model_fields)


def _describe(error: ValidationError, source: str) -> str:
    """The first problem as one line: which key, in which file or variable, and what would be valid."""
    import difflib

    first = error.errors(include_url=False)[0]
    loc = tuple(str(p) for p in first["loc"])
    where = ".".join(loc)
    if first["type"] == "extra_forbidden":
        valid = _known_keys(loc[:-1])
        close = difflib.get_close_matches(loc[-1], valid, n=1, cutoff=0.6)
        prefix = ".".join(loc[:-1] + (close[0],)) if close else ""
        hint = (
            f"did you mean '{prefix}'?"
            if close
            else (f"valid keys here: {', '.join(valid)}" if valid else "")
        )
        return f"{source}: unknown setting '{where}'" + (f"; {hint}" if hint else "")
    ctx = first.get("ctx") or {}
    kind = first["type"]
    bounds = {
        "greater_than_equal": "at least",
        "less_than_equal": "at most",
        "greater_than": "more than",
        "less_than": "less than",
    }
    if kind in bounds:
        what = f"must be {bounds[kind]} {next(iter(ctx.values()), '')}"
    elif kind in ("int_parsing", "int_type", "int_from_float"):
        what = "must be a whole number"
    elif kind in ("float_parsing", "float_type"):
        what = "must be a number"
    elif kind in ("string_type",):
        what = "must be a string (in quotes)"
    elif kind in ("list_type",):
        what = "must be a list, e.g. ['a', 'b']"
    elif kind in ("bool_type", "bool_parsing"):
        what = "must be true or false"
    elif kind in ("dict_type", "model_type"):
        what = f"must be a table ([{where}])"
    elif kind == "value_error" and ctx.get("error") is not None:
        what = str(ctx["error"])
    else:
        what = first["msg"].lower()
    got = first.get("input")
    shown = f" (got {got!r})" if isinstance(got, (int, float)) and not isinstance(got, bool) else ""
    return f"{source}: invalid setting '{where}': {what}{shown}"


def load(path: "str | None" = None, env=None) -> Settings:
    """Read the effective settings. A missing config.toml means all defaults."""
    path = path or settings_path()
    env = os.environ if env is None else env
    try:
        data = configfile.load(path)
    except configfile.ConfigFileError as exc:
        raise SettingsError(str(exc)) from None
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(_describe(exc, path)) from None
    for var, (table, key) in ENV_OVERRIDES.items():
        if var in env:
            try:
                setattr(getattr(settings, table), key, env[var])
            except ValidationError as exc:
                raise SettingsError(
                    _describe(exc, f"${var}").replace(f"'{key}'", f"'{table}.{key}'")
                ) from None
    return settings


def effective(path: "str | None" = None, env=None) -> "list[dict]":
    """Every setting with its value and source: 'default', the file, or the variable."""
    path = path or settings_path()
    env = os.environ if env is None else env
    current = load(path, env)
    in_file = configfile.load(path)
    by_var = {f"{table}.{key}": var for var, (table, key) in ENV_OVERRIDES.items() if var in env}
    rows = []
    for table, section in current:
        for key, value in section:
            dotted = f"{table}.{key}"
            if dotted in by_var:
                source = f"${by_var[dotted]}"
            elif key in in_file.get(table, {}):
                source = path
            else:
                source = "default"
            # validation refuses a password; never print one all the same
            if dotted == "store.url":
                from kirolearn.store.url import redact_url

                value = redact_url(value)
            rows.append({"key": dotted, "value": value, "source": source})
    return rows
