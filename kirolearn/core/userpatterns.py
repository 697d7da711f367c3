"""User patterns (`[scrub] extra_patterns`): refuse the shapes that make a backtracking engine run for ever.

Python's `re` backtracks, and it cannot be interrupted: one pattern such as `(a+)+$` meeting a long
run of `a`s holds the drain (and every hook that re-scrubs its output) for good. A pattern is refused
when a repeat that can match many times holds another such repeat (`(a+)+`, `(\\w*\\s?)*`) or an
alternation (`(a|aa)+`): the nested choices are what blow up. Bounded repeats (`{0,8}`) and single
characters or classes under a repeat (`[A-Z0-9]{32}`, `\\w+`) are fine. Standard library only: the
settings check it when config.toml is loaded, and the hook's own reading of [scrub] does too.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:  # types only: `typing` would cost the hook its import
    from collections.abc import Iterable, Sequence
    from types import ModuleType
    from typing import Any  # the parser's tree: (opcode, argument) pairs, the argument's shape by opcode

# a repeat that may match more than this many times counts as unbounded
UNBOUNDED = 16


def problem(pattern: str) -> "str | None":
    """Why `pattern` is refused (it does not compile, or it can backtrack for ever), or None."""
    import re

    try:
        # Python 3.11+
        from re import _parser as parser  # type: ignore[attr-defined]
    except ImportError:  # Python 3.10
        import sre_parse as parser
    try:
        re.compile(pattern)
        tree = parser.parse(pattern)
    except (re.error, RecursionError, OverflowError) as err:
        return f"invalid regex: {err}"
    nested = _nested(tree, parser, under_repeat=False)
    if nested:
        return (
            f"{nested} inside a repeat can take exponential time on some text (like (a+)+ or (a|aa)*); "
            "rewrite it without the nesting, e.g. bound the inner repeat with {0,N} or use a character class"
        )
    return None


def _nested(items: "Iterable[tuple[Any, Any]]", parser: "ModuleType", under_repeat: bool) -> "str | None":
    """A description of the first choice nested under an unbounded repeat in `items`, or None."""
    consts = parser if hasattr(parser, "MAX_REPEAT") else parser._constants
    repeats = (consts.MAX_REPEAT, consts.MIN_REPEAT, getattr(consts, "POSSESSIVE_REPEAT", None))
    for op, av in items:
        if op in repeats:
            low, high, sub = av
            many = high is consts.MAXREPEAT or high > UNBOUNDED
            if many and under_repeat:
                return "a repeat"
            found = _nested(sub, parser, under_repeat or (many and _can_vary(sub, consts)))
            if found:
                return found
        elif op is consts.BRANCH:
            if under_repeat:
                return "an alternation"
            for branch in av[1]:
                found = _nested(branch, parser, under_repeat)
                if found:
                    return found
        elif op is consts.SUBPATTERN:
            found = _nested(av[-1], parser, under_repeat)
            if found:
                return found
        elif op in (consts.ASSERT, consts.ASSERT_NOT):
            found = _nested(av[1], parser, under_repeat)
            if found:
                return found
    return None


def _can_vary(sub: "Sequence[tuple[Any, Any]]", consts: "ModuleType") -> bool:
    """Can `sub` match in more than one way (anything beyond a single literal, class or any-character)?"""
    simple = (consts.LITERAL, consts.NOT_LITERAL, consts.IN, consts.ANY, consts.CATEGORY)
    return not (len(sub) == 1 and sub[0][0] in simple)
