"""kirolearn: durable memory for Kiro agents.

This module must stay import-free: every Kiro hook imports the package, and the
hook path is budgeted in milliseconds (see design.md rule 1). `kirolearn.Memory`,
the library facade, and `__version__` (kirolearn.version) load on first use
(PEP 562). The facade sits above everything, so only surfaces import the
package itself; the modules below take what they need from its modules.
"""

__all__ = ["Memory", "__version__"]


def __getattr__(name):
    if name == "Memory":
        from kirolearn.memory import Memory  # the facade sits above all it calls: only surfaces import it

        return Memory
    if name == "__version__":
        from kirolearn.version import __version__

        return __version__
    raise AttributeError(f"module 'kirolearn' has no attribute {name!r}")
