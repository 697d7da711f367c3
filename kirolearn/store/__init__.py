"""The store boundary: the only package that holds SQL (design.md rule 10)."""
