"""What a record says about the code, and whether it still holds (design.md rule 16).

A claim cites one thing in one file: a setting's key and value (`[production] LOG_LEVEL` in a
TOML file, `WORKER_CONCURRENCY` in settings.py), a dependency's version, a symbol's definition
(`def render`), or, where no parser knows the file, the lines a turn wrote.

- `facts`: a file's text read into what a claim can cite, by file type;
- `model`: the claim itself and its digest;
- `check`: a claim compared with the working tree (moves followed).

Standard library only: the hook re-checks the claims of the lines it is about to show.
"""
