"""The store boundary: the only package that holds SQL (architecture.md rule 10)."""
