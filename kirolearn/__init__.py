"""kirolearn: durable memory for Kiro agents.

This module must stay import-free: every Kiro hook imports the package, and the
hook path is budgeted in milliseconds (see design.md rule 1).
"""

__version__ = "0.1.0"
