"""What every floor shares: paths, errors, ids, time, JSON, text cuts, project identity (standard library only)."""
