"""kirolearn: durable memory for Kiro agents.

This module imports nothing but its version (a leaf): every Kiro hook imports the
package, and the hook path is budgeted in milliseconds (see design.md rule 1).
`kirolearn.Memory`, the library facade, is loaded on first use (PEP 562); so only
surfaces import the package itself, and the modules below them take what they
need from its modules.
"""

from kirolearn.version import __version__
__all__ = ["Memory", "__version__"]


def __getattr__(name):
    if name == "Memory":
        from kirolearn.memory import Memory  # the facade sits above everything it calls: only surfaces import it

        return Memory
    raise AttributeError(f"module 'kirolearn' has no attribute {name!r}")
