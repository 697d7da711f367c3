"""Embedding models behind one interface: base, registry, and the backends."""
