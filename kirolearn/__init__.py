"""kirolearn: durable memory for Kiro agents.

This module must stay import-free: every Kiro hook imports the package, and the
hook path is budgeted in milliseconds (see design.md rule 1). `kirolearn.Memory`,
the library facade, is loaded on first use (PEP 562).
"""

__version__ = "0.1.0"
__all__ = ["Memory", "__version__"]


def __getattr__(name):
    if name == "Memory":
        from kirolearn.memory import Memory

        return Memory
    raise AttributeError(f"module 'kirolearn' has no attribute {name!r}")
