"""kirolearn: durable memory for coding agents (Kiro first; Claude Code, Codex, Copilot, Gemini, opencode, Cursor).

This module must stay import-free: every agent hook imports the package, and the
hook path is budgeted in milliseconds (see architecture.md rule 1). `kirolearn.Memory`,
the library facade, and `__version__` (kirolearn.core.version) load on first use
(PEP 562). The facade sits above everything, so only surfaces import the
package itself; the modules below take what they need from its modules.
"""

__all__ = ["Memory", "__version__"]


def __getattr__(name):
    if name == "Memory":
        # the facade sits above all it calls: only surfaces import it
        from kirolearn.memory import Memory

        return Memory
    if name == "__version__":
        from kirolearn.core.version import __version__

        return __version__
    raise AttributeError(f"module 'kirolearn' has no attribute {name!r}")
