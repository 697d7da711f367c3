"""MCP server start-up: spawn -> `tools/list` answered, through the real mcp client over stdio.

What an agent waits for before it can offer kirolearn's tools to its model (real Codex sends its
first model request without them when the server is late: issue #33). Alternates, in one run:
the venv's bare `python -c pass`; `kirolearn-mcp` (its start-up front answers `initialize` and
`tools/list` without loading the SDK); the SDK server alone (the same tools, started as before the
front); and `kirolearn-mcp` on to its first tool call (the SDK loads then). Medians, and each as a
ratio of the bare interpreter's (goal: tools/list within 15x). Prints a table; never fails.

    python bench/bench_mcp_start.py [--venv DIR] [--runs N] [--figures docs/figures.json]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import anyio
from benchtable import compile_package, print_table
from figures import merge
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HERE = os.path.dirname(os.path.abspath(__file__))
SDK_ONLY = (
    "import sys; from kirolearn.mcp_server import app; app.setup_logging(); "
    "app.serve_stdio(sys.argv[1], 'bench')"
)


def bare(python: str, env) -> float:
    start = time.perf_counter()
    subprocess.run([python, "-c", "pass"], env=env, check=True)
    return (time.perf_counter() - start) * 1000


def client_run(command: str, args, env, call_tool: bool = False) -> float:
    """ms from spawn to the tools/list answer (or, call_tool, to the first tool call's answer)."""

    async def go():
        params = StdioServerParameters(command=command, args=list(args), env=env)
        start = time.perf_counter()
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                tools = (await client.list_tools()).tools
                if call_tool:
                    await client.call_tool("session_init", {})
                elapsed = (time.perf_counter() - start) * 1000
                assert any(t.name == "search_memory" for t in tools)
                return elapsed

    return anyio.run(go)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=os.path.join(os.path.dirname(HERE), ".venv"))
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--figures", help="merge the quoted figures into this file (make bench: docs/figures.json)"
    )
    args = parser.parse_args()
    compile_package(args.venv)
    python = os.path.join(args.venv, "bin", "python")
    server = os.path.join(args.venv, "bin", "kirolearn-mcp")
    with tempfile.TemporaryDirectory() as tmp:
        project = os.path.join(tmp, "project")
        os.makedirs(os.path.join(project, ".git"))
        env = dict(os.environ, KIROLEARN_HOME=os.path.join(tmp, "home"), KIROLEARN_EMBEDDING_MODEL="none")
        runs = {"bare": [], "front": [], "sdk": [], "call": []}
        client_run(
            server, ["--project", project], env, call_tool=True
        )  # warm: bytecode, the home's first files
        for _ in range(args.runs):
            runs["bare"].append(bare(python, env))
            runs["front"].append(client_run(server, ["--project", project], env))
            runs["bare"].append(bare(python, env))
            runs["sdk"].append(client_run(python, ["-c", SDK_ONLY, project], env))
            runs["call"].append(client_run(server, ["--project", project], env, call_tool=True))
    med = {k: statistics.median(v) for k, v in runs.items()}
    rows = [
        ("bare python -c pass (median ms)", f"{med['bare']:.0f}", ""),
        ("kirolearn-mcp spawn -> tools/list (ms)", f"{med['front']:.0f}", ""),
        ("  as a ratio of bare python", f"{med['front'] / med['bare']:.1f}x", "<= 15x"),
        ("SDK server alone spawn -> tools/list (ms)", f"{med['sdk']:.0f}", ""),
        ("  as a ratio of bare python", f"{med['sdk'] / med['bare']:.1f}x", "(before #33)"),
        ("kirolearn-mcp spawn -> first tool call (ms)", f"{med['call']:.0f}", ""),
        ("  as a ratio of bare python", f"{med['call'] / med['bare']:.1f}x", ""),
    ]
    print_table(f"MCP server start-up, real mcp client over stdio, median of {args.runs} (alternating)", rows)
    if args.figures:
        values = {
            "runs": args.runs,
            "bare_ms": med["bare"],
            "tools_list_ms": med["front"],
            "first_call_ms": med["call"],
        }
        values.update(tools_list_ratio=med["front"] / med["bare"], first_call_ratio=med["call"] / med["bare"])
        merge(args.figures, "mcp_start", {k: round(v, 3) for k, v in values.items()}, args.venv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
