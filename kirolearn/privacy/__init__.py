"""Privacy: the scrubber, its rules table, and the tools that re-apply it to what is already kept."""
