"""The team store's URL rule: a PostgreSQL URL that never holds a password.

Credentials come from libpq (PGPASSFILE / ~/.pgpass, a service file, PGPASSWORD in the drainer's
environment), so kirolearn keeps none in plain text: `check_store_url` refuses a URL with one
(settings read `[store] url` and KIROLEARN_STORE_URL through it), and `redact_url` hides any that
got through before a URL is shown (status, doctor, team status, the PostgreSQL store's errors).
"""

from __future__ import annotations

import urllib.parse

from kirolearn.core.errors import ConfigError

SCHEMES = ("postgresql", "postgres")
# libpq parameters holding a secret: never in a URL kirolearn stores
SECRET_PARAMS = ("password", "sslpassword")

PASSWORD_FIX = (
    "leave the password out of the URL and let libpq find it: a line in ~/.pgpass (or the file "
    "PGPASSFILE names, mode 0600), a service in ~/.pg_service.conf used as "
    "postgresql:///?service=NAME, or PGPASSWORD in the drainer's environment; see docs/team.md"
)


def _split(url: str) -> urllib.parse.SplitResult:
    try:
        return urllib.parse.urlsplit(url)
    except ValueError as exc:  # e.g. an unclosed [ipv6 bracket
        raise ConfigError(
            f"the team store URL is not a valid URL ({exc})",
            "write it as postgresql://[user@]host[:port]/dbname[?param=value]",
        ) from None


def check_store_url(url: str) -> str:
    """`url` stripped if it is an acceptable team store URL ('' = no team store); else ConfigError.

    The message never repeats the URL: it may hold the very password it refuses.
    """
    url = (url or "").strip()
    if not url:
        return ""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in SCHEMES:
        shown = (
            f"'{scheme}://'" if scheme and scheme.isascii() and scheme.replace("+", "").isalnum() else "none"
        )
        raise ConfigError(
            f"the team store URL must start with postgresql:// (scheme: {shown})",
            "only a PostgreSQL server can be a team store; leave [store] url empty for the "
            "local SQLite store",
        )
    parts = _split(url)
    if parts.password is not None or ":" in parts.netloc.rpartition("@")[0]:
        raise ConfigError(
            "the team store URL holds a password, which kirolearn will not keep in plain text", PASSWORD_FIX
        )
    params = {k.lower() for k, _ in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)}
    secret = sorted(params & set(SECRET_PARAMS))
    if secret:
        raise ConfigError(
            f"the team store URL holds a '{secret[0]}' parameter, which kirolearn will not keep "
            "in plain text",
            PASSWORD_FIX,
        )
    return url


def redact_url(url: str) -> str:
    """`url` safe to print: any password or secret parameter replaced by '***' (defence in depth)."""
    if not url:
        return url
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "(invalid URL)"
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:***@{hostport}"
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    secret_query = any(k.lower() in SECRET_PARAMS for k, _ in pairs)
    if netloc == parts.netloc and not secret_query:
        return url  # nothing to hide: show it exactly as written
    query = parts.query
    if secret_query:
        query = "&".join(
            f"{k}=***" if k.lower() in SECRET_PARAMS else f"{k}={urllib.parse.quote(v, safe='/')}"
            for k, v in pairs
        )
    # by hand: urlunsplit drops the '//' of an empty host (the local socket)
    return (
        f"{parts.scheme}://{netloc}{parts.path}"
        + (f"?{query}" if query else "")
        + (f"#{parts.fragment}" if parts.fragment else "")
    )
