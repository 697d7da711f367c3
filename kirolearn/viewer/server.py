"""The local web viewer (`kirolearn serve`): Starlette + uvicorn + Jinja2, no JavaScript.

Why this stack: all three already come with kirolearn's dependencies (the mcp
SDK needs Starlette and uvicorn, litellm needs Jinja2), so the viewer adds no
download; they are small and well kept; Jinja2 escapes every value by default.
Pages are rendered on the server and writes are plain HTML forms, so the page
runs no script at all and its Content-Security-Policy forbids any.

Safety, as Jupyter does it: the server binds 127.0.0.1 only; a random token
per run is in the URL it prints and is then kept in a SameSite=Strict cookie;
any request without it gets 403; the Host header must name this server (no DNS
rebinding); every write is a POST carrying a CSRF token derived from the run's
token, from this origin. Memory is untrusted text: every value is re-scrubbed
(kirolearn.manage.records) and escaped by the templates.
"""

import secrets
import socket
import threading


def bind(port: int = 0) -> socket.socket:
    """A listening socket on 127.0.0.1 (port 0 = any free port). Never any other address."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        from kirolearn.core.errors import KirolearnError

        raise KirolearnError(
            f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})",
            "choose another --port, or --port 0 for any free one",
        ) from None
    sock.listen(128)
    return sock


class Running:
    """A viewer served from a background thread (tests, demos): its url, token and stop()."""

    def __init__(self, server, thread, url: str, token: str, port: int):
        self.server, self.thread, self.url, self.token, self.port = server, thread, url, token, port

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


def _server(port: int, token: "str | None"):
    import uvicorn

    from kirolearn.store.backends import open_store
    from kirolearn.viewer.app import create_app

    # migrate once up front; requests then open the store as it is
    open_store().close()
    sock = bind(port)
    port = sock.getsockname()[1]
    token = token or secrets.token_urlsafe(32)
    app = create_app(token, port)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False)
    return uvicorn.Server(config), sock, f"http://127.0.0.1:{port}/?token={token}", token, port


def start(port: int = 0, token: "str | None" = None) -> Running:
    """Serve in a daemon thread; the socket already listens, so the URL works at once."""
    server, sock, url, token, port = _server(port, token)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="kirolearn-viewer"
    )
    thread.start()
    return Running(server, thread, url, token, port)


def serve(port: int = 0, open_browser: bool = False, announce=print) -> None:
    """Serve until interrupted (the `kirolearn serve` command)."""
    server, sock, url, _, _ = _server(port, None)
    announce(url)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    server.run(sockets=[sock])
