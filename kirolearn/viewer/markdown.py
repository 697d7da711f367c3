"""Memory text as HTML for the viewer: CommonMark through markdown-it-py, with raw HTML off.

Memory is untrusted (architecture.md rule 9). The renderer escapes every character of the
source that is not markdown syntax, raw HTML is off (shown as text, not parsed), and links,
autolinks and images are off too: a memory cannot make the viewer load or point anywhere.
What it renders is headings, emphasis, lists, code and paragraphs.
"""

from markupsafe import Markup

_MD = None


def _renderer():
    global _MD
    if _MD is None:
        from markdown_it import MarkdownIt

        _MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).disable(
            ["image", "link", "autolink", "html_inline", "html_block", "reference"]
        )
    return _MD


def render(text) -> Markup:
    """Safe HTML of a (re-scrubbed) memory text. A line that could pass for a marker (`## SYSTEM:`)
    is quoted first (kirolearn.privacy.sanitize.guard_lines), so it renders as a quote, not a heading."""
    from kirolearn.privacy.sanitize import guard_lines

    return Markup(_renderer().render(guard_lines(str(text or ""))))


def render_inline(text) -> Markup:
    """Safe HTML of one line of memory text (a fact): `code` spans and emphasis, no paragraph; the
    source escaped first by the renderer, raw HTML, links and images off as in `render`."""
    from kirolearn.privacy.sanitize import guard_lines

    return Markup(_renderer().renderInline(" ".join(guard_lines(str(text or "")).split())))


def snippet(text, limit: int = 300) -> str:
    """`text` cut to about `limit` characters at a word, with its code closed: a cut inside a `code span`
    or a fenced block gets its closing backticks, so no stray backtick swallows what follows."""
    text = str(text or "")
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    cut = cut.rstrip()
    fences = cut.count("```")
    # inside a fenced block: close it on its own line, the marker after it
    if fences % 2:
        return cut + "…\n```"
    ticks = cut.replace("```", "").count("`")
    if ticks % 2:  # inside a code span: close it before the marker
        return cut + "…`"
    return cut + "…"
