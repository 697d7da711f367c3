"""kirolearn's version, and the version of its scrub rules, in a leaf module.

The hook stamps `__version__` on every event (capture/events.py); importing it from here keeps
the hook path clear of the package's facade (kirolearn.Memory). `SCRUB_RULES_VERSION` marks what
stored text was scrubbed with: the store stamps a new database with it, recall trusts text scrubbed
with it, and `kirolearn rescrub` brings older text up to it.
"""

__version__ = "0.1.0"

# bump on any change of the scrubber's rules: rescrub follows
SCRUB_RULES_VERSION = 5
