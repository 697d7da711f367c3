"""The MCP server's name and which of its tools an installer may auto-approve (a leaf: the adapters,
the installer and the tests read it; kirolearn.mcp_server's own annotations are checked against it
in tests/test_agents.py)."""

MCP_SERVER = "kirolearn"
MCP_DESTRUCTIVE_TOOLS = ("forget_memory",)
MCP_SAFE_TOOLS = ("search_memory", "get_memory", "session_init", "save_session_summary", "save_observation", "session_end")
