"""The embedded SQLite store (sqlite-utils): the default backend."""
