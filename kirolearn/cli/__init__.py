"""The `kirolearn` command line: the fast path (`fast`), the click group and its command files."""
