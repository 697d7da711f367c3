"""Write kirolearn/mcp_server/listing.json: the SDK server's own start-up answers (its `initialize`
capabilities and instructions, the protocol versions it accepts, its `tools/list`), which
`kirolearn-mcp` sends without loading the SDK (kirolearn/mcp_server/__init__.py).

Run it after changing a tool's name, description, arguments or annotations, or the mcp SDK:
    .venv/bin/python scripts/mcp_listing.py
tests/test_mcp_start.py fails while the file differs from what the SDK server lists.
"""

import json
import sys
import tempfile

import anyio


def render() -> "tuple[str, str]":
    from kirolearn.mcp_server import LISTING, app

    with tempfile.TemporaryDirectory() as project:  # the listing names no project
        listing = anyio.run(app.listing_of, app.build_server(project))
    return LISTING, json.dumps(listing, indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    path, text = render()
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
