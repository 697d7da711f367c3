"""The drain pipeline: validate, dedup, scrub, store and extract what the spool holds."""
