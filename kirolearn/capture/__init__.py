"""Capture: the standard-library-only hook path, the spool it writes, and one adapter per agent."""
