"""Team memory: membership on this machine, the team store's schema, and the sync."""
