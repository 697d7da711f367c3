"""Managing memory by hand: list, show, forget, restore, edit, purge, import."""
