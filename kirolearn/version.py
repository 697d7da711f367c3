"""kirolearn's version, in a leaf module: the hook stamps it on every event (capture/events.py),
and importing it from here keeps the hook path clear of the package's facade (kirolearn.Memory)."""

__version__ = "0.1.0"
