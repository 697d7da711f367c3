"""Issue #34: secret shapes and `<private>` spellings that still reached the store.

Each test names one shape the issue found stored; tests/shapes34.py builds the matrix of these
families under the transforms of tests/transforms.py (test_the_shapes_matrix below) and the
look-alikes that must be kept.
"""

import json

import pytest

from kirolearn.privacy.scrub import Scrubber

BODY = "my home address is 12 Oak Street"
P = "[REDACTED:private]"


@pytest.fixture()
def s():
    return Scrubber()


# --------------------------------------------------------------------------------------------------
# B. <private> spellings
# --------------------------------------------------------------------------------------------------

SPELLINGS = {
    "html-twice": f"&amp;lt;private&amp;gt;{BODY}&amp;lt;/private&amp;gt;",
    "html-three-times": f"&amp;amp;lt;private&amp;amp;gt;{BODY}&amp;amp;lt;/private&amp;amp;gt;",
    "fullwidth": f"＜private＞{BODY}＜/private＞",
    "small-form": f"﹤private﹥{BODY}﹤/private﹥",
    "zero-width": f"<pri\u200bvate>{BODY}</pri\u200bvate>",
    "zero-width-open-only": f"<p\u200brivate>{BODY}</private>",
    "word-joiner": f"<priv\u2060ate>{BODY}</priv\u2060ate>",
    "soft-hyphen-html": f"<pri&#173;vate>{BODY}</pri&#173;vate>",
    "markdown-escaped": f"\\<private\\>{BODY}\\</private\\>",
    "json-slash": f"<private>{BODY}<\\/private>",
}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
@pytest.mark.parametrize("carrier", ["bare", "prose", "html", "json", "url"])
def test_private_spellings_are_redacted(s, name, carrier):
    import urllib.parse

    tag = SPELLINGS[name]
    text = {
        "bare": tag,
        "prose": f"note {tag} thanks",
        "html": f"<p>{tag}</p>",
        "json": json.dumps({"prompt": f"note {tag} thanks"}),
        "url": "https://app.example.com/cb?q=" + urllib.parse.quote(f"note {tag} thanks"),
    }[carrier]
    out = s.scrub_text(text)
    assert "Oak" not in out, out
    assert "[REDACTED:private]" in out
    assert s.scrub_text(out) == out


def test_private_spellings_keep_their_surroundings(s):
    assert s.scrub_text(f"a {SPELLINGS['fullwidth']} b") == f"a {P} b"
    assert s.scrub_text(f"a {SPELLINGS['zero-width']} b") == f"a {P} b"
    assert s.scrub_text(f"a {SPELLINGS['html-twice']} b") == f"a {P} b"
    # the backslash before `<` is markdown's, outside the tag
    assert s.scrub_text(f"a {SPELLINGS['markdown-escaped']} b") == f"a \\{P} b"


@pytest.mark.parametrize(
    "text",
    [
        "＜privateer＞x＜/privateer＞",
        "a ＜/private＞ stray closing tag",
        "the private\u200b key word alone",
        "public class Foo { pri\u200bvate int x; }",
        "\\<private/\\> is empty",
        "&amp;lt;privately&amp;gt; held",
        "private < public and public > protected",
    ],
)
def test_private_look_alikes_are_kept(s, text):
    assert s.scrub_text(text) == text


# --------------------------------------------------------------------------------------------------
# A. Secret shapes
# --------------------------------------------------------------------------------------------------

PW = "Zq8mP2vL9xR4tW"  # fake, as every value here
SID = "wnuh3ylome9odbqwou6tx2k9t3r6uw3p"
CSRF = "Kx81bQ0pLmZ2aT9wYc4dE7fG"


def _b64(text):
    import base64

    return base64.b64encode(text.encode()).decode()


def _clean(s, text, *secrets):
    out = s.scrub_text(text)
    for secret in secrets:
        assert secret not in out, (text, out)
    assert s.scrub_text(out) == out  # idempotent
    return out


@pytest.mark.parametrize(
    "text",
    [
        f"machine api.example.com login bob password {PW}",
        f"machine api.example.com\n  login bob\n  password {PW}\n",
        f"machine api.example.com\n\tlogin bob\n\tpassword {PW}\n\nmachine other.example.org login x password y2k",
        f"machine 10.0.4.12 password {PW} login bob",
        f'machine registry.internal:5000 login bob password "{PW}"',
        f"default login anonymous password {PW}",
        f"$ cat ~/.netrc\nmachine api.github.com\nlogin octocat\npassword {PW}\n",
        json.dumps({"stdout": f"machine api.example.com\n  login bob\n  password {PW}\n"}),
        f"printf 'machine api.example.com\\nlogin bob\\npassword {PW}\\n' > ~/.netrc",
    ],
)
def test_netrc_passwords_are_redacted(s, text):
    out = _clean(s, text, PW)
    assert "[REDACTED:user-password]" in out
    assert "login" in out and "machine" in out or "default" in out


@pytest.mark.parametrize(
    "text",
    [
        "machine learning login page: the password reset flow needs a redesign",
        "netrc format: machine <host> login <user> password <password>",
        "machine api.example.com login bob password ${NETRC_PASSWORD}",
        "machine api.example.com login bob password password",
        "by default login and password are both admin? no, see the docs",
    ],
)
def test_netrc_look_alikes_are_kept(s, text):
    assert s.scrub_text(text) == text


@pytest.mark.parametrize(
    "text, secrets",
    [
        (f"Cookie: sessionid={SID}; csrftoken={CSRF}", [SID, CSRF]),
        (f"cookie: theme=dark; sessionid={SID}", [SID]),
        (f"> Cookie: _gh_sess={CSRF}; logged_in=yes", [CSRF]),
        (f"Set-Cookie: sessionid={SID}; Path=/; HttpOnly; Secure", [SID]),
        (f"set-cookie: remember_token={CSRF}%3D%3D; expires=Fri, 01 Jan 2027 00:00:00 GMT", [CSRF]),
        (f'curl -H "Cookie: JSESSIONID={SID}" https://app.example.com/', [SID]),
        (f'{{"headers": "Cookie: sessionid={SID}; csrftoken={CSRF}"}}', [SID, CSRF]),
        (f"Cookie: theme=dark; app_state={SID}", [SID]),  # a random value under any name
    ],
)
def test_cookie_values_are_redacted(s, text, secrets):
    out = _clean(s, text, *secrets)
    assert "[REDACTED:authorization]" in out


@pytest.mark.parametrize(
    "text",
    [
        "Cookie: theme=dark; lang=en-US",
        "Set-Cookie: sessionid=deleted; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
        "Set-Cookie: Path=/; HttpOnly; SameSite=Lax",
        "send `Cookie: name=value; name2=value2` with each request",
        "the Cookie: header is sent by the browser",
        "cookie: consent=yes",
    ],
)
def test_cookie_look_alikes_are_kept(s, text):
    assert s.scrub_text(text) == text


def test_set_cookie_keeps_its_attributes(s):
    out = s.scrub_text(f"Set-Cookie: sessionid={SID}; Path=/; HttpOnly")
    assert out == "Set-Cookie: sessionid=[REDACTED:authorization]; Path=/; HttpOnly"


@pytest.mark.parametrize(
    "line",
    [
        f"DB_PASSWORD={PW}",
        f"export STRIPE_SECRET=sk_live_{'a1B2c3D4e5F6g7H8i9J0k1L2'}\n",
        f"PORT=8080\nDATABASE_URL=postgres://app:{PW}@db/app\n",
        f'{{"password": "{PW}"}}',
    ],
)
@pytest.mark.parametrize(
    "shape",
    [
        "echo {} | base64 -d",
        "printf %s '{}' | base64 --decode",
        "data: {}",
        "kubectl create secret generic app --from-literal=env={}",
    ],
)
def test_base64_of_a_secret_is_masked_whole(s, line, shape):
    blob = _b64(line)
    text = shape.format(blob)
    out = _clean(s, text, blob, blob[:-4], blob[8:])
    assert "[REDACTED:" in out


def test_base64_wrapped_at_76_columns_is_masked(s):
    blob = _b64(f"# .env\nDEBUG=false\nDB_PASSWORD={PW}\nAWS_REGION=eu-west-1\nPORT=8080\n")
    wrapped = "\n".join(blob[i : i + 76] for i in range(0, len(blob), 76))
    out = _clean(
        s, f"echo '{wrapped}' | base64 -d > .env", *[blob[i : i + 76] for i in range(0, len(blob), 76)]
    )
    assert "[REDACTED:" in out


@pytest.mark.parametrize(
    "text",
    [
        "echo aGVsbG8gd29ybGQ= | base64 -d",
        "echo " + _b64("PORT=8080 DEBUG=false LOG_LEVEL=info") + " | base64 -d",
        "echo " + _b64("Fix the export of empty tables (#42)") + " | base64 --decode",
        "data: " + _b64('{"name": "widget", "size": 3}'),
        '      "integrity": "sha512-' + _b64("x" * 3) + 'Q1w2E3r4T5y6U7i8O9p0AaSsDdFfGgHhJjKkLl==",',
        "/usr/lib/python3.11/site-packages/kirolearn/privacy/scrub.py",
    ],
)
def test_harmless_base64_is_kept(s, text):
    assert s.scrub_text(text) == text


@pytest.mark.parametrize(
    "text",
    [
        f"postgres://user:{PW[:6]}\n{PW[6:]}@db.internal/app",
        f"psql postgres://app_user:{PW[:9]}\r\n{PW[9:]}@db.internal:5432/app",
        f"DATABASE_URL=postgres://app_user:{PW[:3]}\n  {PW[3:]}@db.internal:5432/app",
        f"connecting to postgresql://app_user:\n{PW}@db.internal:5432/app ...",
        f"psql postgres://app_user:{PW}\n@db.internal:5432/app",
        f"psql postgres://app_user:5\n{PW}@db.internal:5432/app",
        json.dumps({"stdout": f"DATABASE_URL=postgres://u:{PW[:5]}\n{PW[5:]}@db/app"}),
    ],
)
def test_url_password_wrapped_onto_the_next_line_is_redacted(s, text):
    out = s.scrub_text(text)
    joined = out.replace("\r\n", "").replace("\n  ", "").replace("\n", "").replace("\\n", "")
    assert PW not in joined and PW[:5] not in out, out
    assert "[REDACTED:url-password]" in out
    assert s.scrub_text(out) == out


@pytest.mark.parametrize(
    "text",
    [
        "Listening on http://0.0.0.0:8080\nuser@host:~$ ls",
        "see http://localhost:3000\n  admin@example.com will get a mail",
        "psql postgres://app_user@db.internal:5432/app\n  -- connected as app_user",
    ],
)
def test_wrapped_url_look_alikes_are_kept(s, text):
    assert s.scrub_text(text) == text


@pytest.mark.parametrize(
    "text, token",
    [
        ("UPSTREAM=Bearer bPIa84yRnBUb", "bPIa84yRnBUb"),
        ("UPSTREAM=Bearer WXaSCrUZoL8g5ubb", "WXaSCrUZoL8g5ubb"),
        (
            "UPSTREAM=Bearer qhyoprhlhvhyojanrudfuxjdxkxwqnqvgjjspqms",
            "qhyoprhlhvhyojanrudfuxjdxkxwqnqvgjjspqms",
        ),
        ('X_HEADER="Bearer abc123def456"', "abc123def456"),
        ("X_HEADER='Bearer EctT2NLLzP'", "EctT2NLLzP"),
        ('export RELAY="Bearer t0k3n-8f2a.Q"', "t0k3n-8f2a.Q"),
        ("> X-Upstream: Bearer AbCdEfGhIjKlMnOp", "AbCdEfGhIjKlMnOp"),
    ],
)
def test_bearer_token_under_a_neutral_name_is_redacted(s, text, token):
    out = _clean(s, text, token)
    assert "[REDACTED:" in out and "Bearer" in out


@pytest.mark.parametrize(
    "text",
    [
        "the Authorization header uses the Bearer scheme: `Authorization: Bearer <token>`",
        'X_HEADER="Bearer $TOKEN"',
        "UPSTREAM=Bearer ${API_TOKEN}",
        "the bearer token expires after 3600 seconds; Bearer authentication is required",
        'headers = {"Authorization": "Bearer " + access_token}',
        'f"Bearer {self.token}"',
        "Bearer access_token",
        "Bearer self.api_token",
        "Bearer LITELLM_MASTER_KEY",
        "UPSTREAM=Bearer AccessToken",
    ],
)
def test_bearer_look_alikes_are_kept(s, text):
    assert s.scrub_text(text) == text


# --------------------------------------------------------------------------------------------------
# A key split over two tool outputs of one turn
# --------------------------------------------------------------------------------------------------

AWS_SECRET = "r7y7qYRPxkfVUX04Wl/ZbTi8MGGaB+Q5ZUoNxYz1"


@pytest.mark.parametrize(
    "first, second, secret",
    [
        ("$ cat part1\naws_secret_access_key =", f"{AWS_SECRET}\n", AWS_SECRET),
        ("aws_secret_access_key = ", AWS_SECRET, AWS_SECRET),
        (
            "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key=\n",
            f"  {AWS_SECRET}\nok",
            AWS_SECRET,
        ),
        ("export DB_PASSWORD=", f"{PW}\nexit status 0", PW),
        ("Authorization: Bearer", f" {SID}", SID),
        ("machine api.example.com\n  login bob\n  password", f" {PW}\n", PW),
        ("DATABASE_URL=postgres://app_user:", f"{PW}@db.internal:5432/app", PW),
        ("token: ghp_", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 more", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
    ],
)
def test_a_key_split_over_two_texts_of_one_turn(first, second, secret):
    from kirolearn.privacy.carry import scrub_sequence

    s = Scrubber()
    assert secret in s.scrub_text(second)  # alone, the value says nothing: what issue #34 found stored
    out = scrub_sequence([first, second], s)
    assert secret not in "".join(out), out
    assert out[0] == s.scrub_text(first)


@pytest.mark.parametrize(
    "first, second",
    [
        (
            "Set these in ~/.aws/credentials:\naws_secret_access_key =",
            "(left blank on purpose, see the wiki)",
        ),
        ("export DB_PASSWORD=", "exit status 0"),
        ("Authorization: Bearer", "is the scheme the API expects"),
        ("$ cat notes.md\nthe password:", "is in the vault, not here"),
        ("aws_secret_access_key = ", "execute_bash"),
        ("aws_secret_access_key = ", "cat part2.txt"),
        ("aws_secret_access_key = ", "5b0c6f1e-8a2d-4c3b-9e7f-1a2b3c4d5e6f is the request id"),
        ("all 12 tests passed", "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY is the docs' example"),
    ],
)
def test_two_texts_that_only_look_like_a_split_key_are_kept(first, second):
    from kirolearn.privacy.carry import scrub_sequence

    s = Scrubber()
    assert scrub_sequence([first, second], s) == [s.scrub_text(first), s.scrub_text(second)]


def test_the_carry_walks_events_like_the_drain():
    """TurnCarry.scrub_event, as the drain calls it: two postToolUse events of one turn, the name
    at the end of one tool output, the value at the start of the next."""
    from kirolearn.capture.events import scrub_event
    from kirolearn.privacy.carry import TurnCarry

    s = Scrubber()
    carry = TurnCarry(s)

    def tool(command, stdout):
        return {
            "event_id": "e",
            "kind": "tool_use",
            "session_id": "s1",
            "tool_name": "execute_bash",
            "tool_input": {"command": command},
            "tool_response": {"success": True, "result": [{"exit_status": "0", "stdout": stdout}]},
        }

    events = [
        tool("head -c 200 creds", "[default]\naws_secret_access_key ="),
        tool("tail -c 41 creds", f"{AWS_SECRET}\n"),
    ]
    assert AWS_SECRET in json.dumps([scrub_event(e, Scrubber()) for e in events])  # without the carry
    first, second = carry.scrub_event(events[0]), carry.scrub_event(events[1])
    assert AWS_SECRET not in json.dumps([first, second])
    assert s.counts["aws-secret-key"] + s.counts["secret-assignment"] + s.counts["high-entropy"] == 1
    # the envelope and the short fields are scrubbed as without the carry
    assert {k: v for k, v in second.items() if k != "tool_response"} == {
        k: v for k, v in scrub_event(events[1], Scrubber()).items() if k != "tool_response"
    }
    # a new turn forgets the open line
    carry.scrub_value(tool("x", "aws_secret_access_key ="))
    carry.reset()
    assert AWS_SECRET in json.dumps(carry.scrub_value(tool("y", AWS_SECRET)))


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_a_private_span_left_open_goes_on_in_the_next_texts(name):
    from kirolearn.privacy.carry import TurnCarry

    tag = SPELLINGS[name]
    opening, closing = tag.split(BODY)
    carry = TurnCarry(Scrubber())
    out = [
        carry.scrub_text(t)
        for t in (f"note {opening}my home address", "is 12 Oak", f"Street{closing} thanks", "the next text")
    ]
    assert "Oak" not in "".join(out) and "address" not in out[0], out
    assert out[2].endswith(" thanks") and out[3] == "the next text"
    carry.scrub_text(f"note {opening}my home address")
    carry.reset()  # a new turn: the span does not go on
    assert carry.scrub_text("is 12 Oak Street") == "is 12 Oak Street"


def test_the_carry_forgets_after_its_ttl():
    from kirolearn.privacy.carry import TurnCarry

    carry = TurnCarry(Scrubber(), ttl=2)
    carry.scrub_text("aws_secret_access_key =")
    carry.scrub_text("the first text")
    carry.scrub_text("the second text")
    assert carry.scrub_text(AWS_SECRET) == AWS_SECRET


def test_the_carry_counts_like_the_scrubber():
    from kirolearn.privacy.carry import scrub_sequence

    s = Scrubber()
    out = scrub_sequence(["export DB_PASSWORD=", f"{PW}\n"], s)
    assert out[1] == "[REDACTED:secret-assignment]\n" and s.counts == {"secret-assignment": 1}


# --------------------------------------------------------------------------------------------------
# C. The matrix (tests/shapes34.py): families x transforms x carriers, and look-alikes
# --------------------------------------------------------------------------------------------------

# Known limit of the wrapped-token view (tests/test_scrub_matrix.py says why): a blob or token cut
# after a first piece that reads as a word (`REJ` + `fUEF…`) is not joined.
KNOWN_GAPS = {("base64-env", "hard-wrap"), ("base64-env-export", "hard-wrap")}


def test_the_shapes_matrix():
    import shapes34

    result = shapes34.matrix(Scrubber())
    assert result["total"] >= 1000
    assert result["caught"] / result["total"] >= 0.995, [m[:3] for m in result["missed"]]
    assert {(family, name) for family, name, *_ in result["missed"]} <= KNOWN_GAPS, result["missed"][:5]


def test_the_shapes_look_alikes_are_kept():
    import shapes34

    result = shapes34.keep(Scrubber())
    assert result["kept"] == result["total"], result["changed"][:5]


def test_a_complete_token_at_the_end_of_a_text_does_not_swallow_the_next_texts_first_word():
    """The carry joins a cut token with the next text; a token the rules already match whole was not
    cut: `token=ghp_…` closing a prompt, then `pytest tests/…` as the next command, stays `pytest`."""
    from kirolearn.privacy.carry import TurnCarry

    carry = TurnCarry(Scrubber({}, []))
    carry.scrub_text("Why does the export job fail? token=ghp_" + "a" * 36)
    assert carry.scrub_text("pytest tests/test_export.py") == "pytest tests/test_export.py"
    assert carry.counts["github-token"] == 1


def test_a_url_encoded_utf8_character_is_one_escape_of_the_view():
    from kirolearn.privacy import views

    text = "q=%EF%BC%9Cprivate%EF%BC%9E%20x%C3%A9%F0%9F%94%91"
    (view,) = views.escape_views(text)
    assert view.text == "q=＜private＞ xé🔑"
    for ch, escaped in (("＜", "%EF%BC%9C"), ("é", "%C3%A9"), ("🔑", "%F0%9F%94%91")):
        i = view.text.index(ch)
        a, b = view.span(i, i + 1)
        assert text[a:b] == escaped
    assert views.escape_views("bad %C3%28 stays")[0].text == "bad Ã( stays"  # not UTF-8: byte by byte
