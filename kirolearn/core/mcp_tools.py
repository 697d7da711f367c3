"""The MCP server's name and which of its tools an installer may auto-approve (a leaf: the adapters,
the installer and the tests read it; kirolearn.mcp_server's own annotations are checked against it
in tests/test_agents.py)."""

MCP_SERVER = "kirolearn"
MCP_DESTRUCTIVE_TOOLS = ("forget_memory",)
MCP_SAFE_TOOLS = (
    "search_memory",
    "get_memory",
    "session_init",
    "save_session_summary",
    "save_observation",
    "session_end",
)

# Tools that read memory back: a turn calling them repeats memory (claims)
MCP_READ_TOOLS = ("search_memory", "get_memory", "session_init")


def is_memory_tool(name: str) -> bool:
    """Whether a tool call read kirolearn's own memory back (any agent's naming of its MCP tools)."""
    base = (name or "").lower()
    # mcp__kirolearn__search_memory, kirolearn.search_memory, ...; Auggie's is search_memory_kirolearn
    return any(
        base == t or ((base.endswith(t) or base.startswith(t + "_")) and MCP_SERVER in base)
        for t in MCP_READ_TOOLS
    )
