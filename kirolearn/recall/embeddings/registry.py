"""Embedding models behind one small interface, and the registry that names them.

In the spirit of simonw/llm's EmbeddingModel: a model has an id (stored with
every vector, so vectors of different models never mix), a dimension count, a
batch size, and `embed_batch(texts)` returning L2-normalised float32 rows.
Backends register a factory under a prefix; a model string is
"<prefix>/<name>", e.g. "wordllama/l2_supercat_256" (DEFAULT_MODEL: its weights
ship inside the wordllama wheel, so it runs offline), "local/all-MiniLM-L6-v2" or
"litellm/ollama/nomic-embed-text". The default, "auto", is the contextual model when
`kirolearn model install` put it on this machine, else DEFAULT_MODEL. "none" turns
embeddings off. Never imported by the hook (numpy, model weights).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from kirolearn.recall.embeddings.base import EmbeddingModel, EmbeddingUnavailable

DEFAULT_MODEL = "wordllama/l2_supercat_256"
OFF = ("", "none", "off")
# The default: CONTEXTUAL when its weights and code are here, else DEFAULT_MODEL
AUTO = "auto"
CONTEXTUAL = "local/all-MiniLM-L6-v2"


class WordLlamaModel(EmbeddingModel):
    """wordllama static token embeddings (256-d), loaded from the weights inside its wheel.

    `WordLlama.load()` looks for its tokenizer under `tokenizer/` while the wheel ships
    `tokenizers/`; pointing cache_dir at the package folder with downloads disabled
    finds both files and never touches the network (reference/libraries.md §7.1).
    """

    batch_size = 512

    def __init__(self, name: str = "l2_supercat_256"):
        if name not in ("l2_supercat_256", ""):
            raise EmbeddingUnavailable(
                f"wordllama model {name!r} is not shipped in the wheel", "use wordllama/l2_supercat_256"
            )
        self.model_id = "wordllama/l2_supercat_256"
        self.dimensions = 256
        self._wl = None

    def _load(self):
        if self._wl is None:
            try:
                from pathlib import Path

                import wordllama
                from wordllama import WordLlama

                self._wl = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
            except ImportError as exc:
                raise EmbeddingUnavailable(
                    f"wordllama is not installed ({exc})",
                    "pip install wordllama (no wheel for this platform? search stays lexical)",
                ) from None
            except Exception as exc:  # noqa: BLE001
                # any loader failure means: no vectors
                raise EmbeddingUnavailable(
                    f"wordllama could not load its weights: {type(exc).__name__}: {exc}"
                ) from None
        return self._wl

    def _embed(self, texts):
        return self._load().embed(texts, norm=False)


class LiteLLMEmbeddingModel(EmbeddingModel):
    """Any provider litellm knows (openai/…, bedrock/…, ollama/…), for users who configure one.

    Imported lazily with the drainer's offline-safe environment (architecture.md rule 5).
    """

    batch_size = 64

    def __init__(self, name: str, api_base: str = "", timeout: float = 60.0):
        if not name:
            raise EmbeddingUnavailable(
                "litellm embedding model string is empty", "e.g. litellm/ollama/nomic-embed-text"
            )
        self.model_id = "litellm/" + name
        self.name, self.api_base, self.timeout = name, api_base, timeout
        self.dimensions = 0

    def _embed(self, texts):
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
        import litellm

        litellm.suppress_debug_info = True
        kwargs = {"model": self.name, "input": list(texts), "timeout": self.timeout}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        try:
            response = litellm.embedding(**kwargs)
        except Exception as exc:  # noqa: BLE001 - provider errors of every kind
            raise EmbeddingUnavailable(
                f"embedding call to {self.name} failed: {type(exc).__name__}: {str(exc)[:200]}",
                "check embeddings.model / embeddings.api_base; search stays lexical meanwhile",
            ) from None
        rows = [item["embedding"] if isinstance(item, dict) else item.embedding for item in response.data]
        if len(rows) != len(texts):
            raise EmbeddingUnavailable(f"{self.name} returned {len(rows)} vectors for {len(texts)} texts")
        self.dimensions = len(rows[0]) if rows else self.dimensions
        return rows


_REGISTRY: dict[str, Callable[..., EmbeddingModel]] = {}


def register(prefix: str, factory: Callable[..., EmbeddingModel]) -> None:
    """Make "<prefix>/<name>" model strings build models with `factory(name, **options)`."""
    _REGISTRY[prefix] = factory


register("wordllama", lambda name, **_: WordLlamaModel(name))
register(
    "litellm", lambda name, api_base="", timeout=60.0, **_: LiteLLMEmbeddingModel(name, api_base, timeout)
)


def _static(name, **_):
    # its own module: kirolearn's shipped tables
    from kirolearn.recall.embeddings.static import StaticModel

    return StaticModel(name)


register("static", _static)


# "local/<name>": a real sentence model on the CPU, extra kirolearn[model]
def _local(name, **options):
    from kirolearn.recall.embeddings.local import local_model

    return local_model(name, **options)


register("local", _local)

CACHE: dict[tuple, EmbeddingModel] = {}


def get_model(spec: str | None = None, **options) -> EmbeddingModel | None:
    """The model a spec names (None when embeddings are off). Loaded models are cached per process."""
    spec = DEFAULT_MODEL if spec is None else spec.strip()
    if spec.lower() in OFF:
        return None
    prefix, _, name = spec.partition("/")
    if prefix not in _REGISTRY:
        raise EmbeddingUnavailable(
            f"unknown embedding backend {prefix!r} in {spec!r}",
            f'use one of: {", ".join(sorted(_REGISTRY))}, or "none"',
        )
    try:
        import numpy  # noqa: F401 - every backend's vectors are numpy arrays
    except ImportError as exc:
        raise EmbeddingUnavailable(
            f"numpy cannot be imported ({exc})", "reinstall kirolearn (`pip install .`) to bring it back"
        ) from None
    key = (spec, tuple(sorted(options.items())))
    if key not in CACHE:
        CACHE[key] = _REGISTRY[prefix](name, **options)
    return CACHE[key]


def resolve(spec: str, model_dir: str = "") -> tuple[str, str]:
    """(the model string `spec` stands for, why): "auto" is CONTEXTUAL where its weights and code are
    found (no hash check here: loading does it), else DEFAULT_MODEL; any other spec is itself."""
    if spec.strip().lower() != AUTO:
        return spec.strip(), "configured"
    import importlib.util

    missing = [m for m in ("safetensors", "tokenizers") if importlib.util.find_spec(m) is None]
    if missing:
        return DEFAULT_MODEL, (
            f"the default (auto): {CONTEXTUAL} needs {', '.join(missing)} (`kirolearn model install`)"
        )
    # the registry's own backend (see _local)
    from kirolearn.recall.embeddings.local import find_weights

    try:
        _folder, source = find_weights(CONTEXTUAL.partition("/")[2], model_dir)
    except EmbeddingUnavailable:
        return DEFAULT_MODEL, (
            f"the default (auto): {CONTEXTUAL}'s weights are not installed "
            "(`kirolearn model install` gets them)"
        )
    return CONTEXTUAL, f"the default (auto): its weights are installed ({source})"


def from_settings(conf) -> EmbeddingModel | None:
    """The model the settings' [embeddings] table names ("auto": see resolve)."""
    section = getattr(conf, "embeddings", None)
    if section is None:
        return get_model()
    spec, _why = resolve(section.model, section.model_dir)
    return get_model(spec, api_base=section.api_base, model_dir=section.model_dir)


def check(conf) -> tuple[bool, str]:
    """(usable, what doctor says): loads the model and embeds one word."""
    try:
        model = from_settings(conf)
        if model is None:
            return True, 'embeddings are off (embeddings.model = "none"): recall is lexical'
        model.embed_batch(["kirolearn"])
    except EmbeddingUnavailable as exc:
        fix = f" ({exc.fix})" if exc.fix and exc.fix != EmbeddingUnavailable.default_fix else ""
        return False, f"semantic recall is off, search falls back to words alone: {exc.message}{fix}"
    section = getattr(conf, "embeddings", None)
    _spec, why = resolve(section.model, section.model_dir) if section is not None else ("", "configured")
    if why == "configured":
        import os

        why = (
            "set by KIROLEARN_EMBEDDING_MODEL"
            if os.environ.get("KIROLEARN_EMBEDDING_MODEL")
            else "set in config.toml [embeddings] model"
        )
    return True, f"embedding model {model.model_id} loads ({model.dimensions}-d): {why}"
