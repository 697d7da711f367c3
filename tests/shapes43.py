"""Issue #43's shapes: tokens of everyday tools, under the transforms tools apply, in each carrier.

Families (fresh random secrets, seeded): the password flags of command-line tools (mysql, redis-cli,
ldapsearch, openssl, keytool, mongo, sqlcmd, zip, smbclient, …), Oracle's `user/password@db`
logins, `user:password@` without a scheme (Go's MySQL DSN), a token as a URL's user (an Azure
DevOps PAT), tokens in the URL path of known APIs (Discord and Zapier webhooks, Telegram's bot API),
Google OAuth access tokens (`gcloud auth print-access-token`), PuTTY `.ppk` private lines and MAC,
and the split forms: a GitHub token and a JWT over two lines, a bearer token on a neutrally named
.env line. Transforms and carriers: those of tests/shapes34.py (`split`: the text cut in two
just before the secret, as two tool outputs of one turn).

Negatives: text that only looks like these shapes (`-p 8080`, `grep -w word`, `git@host:repo`,
`image:tag@sha256:…`, `openssl -passin env:VAR`, a `.ppk`'s public lines). A negative is kept when
scrubbing leaves it unchanged.

    python tests/shapes43.py     # prints the figures (caught / total, kept / total) and the misses
"""

from __future__ import annotations

import random
import string

import shapes34
import transforms

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B32 = string.ascii_lowercase + "234567"


def _r(rng, n, chars=ALNUM):
    return "".join(rng.choice(chars) for _ in range(n))


def _pw(rng):
    return rng.choice(
        [
            _r(rng, 14),
            _r(rng, 3, string.ascii_uppercase)
            + _r(rng, 5, string.ascii_lowercase)
            + _r(rng, 4, string.digits),
            "Tr0ub4dor-" + _r(rng, 6),
            _r(rng, 8, string.ascii_lowercase) + _r(rng, 3, string.digits) + "x",
        ]
    )


def _jwt(rng):
    return "eyJhbGciOiJIUzI1NiJ9." + "eyJ" + _r(rng, 40) + "." + _r(rng, 43)


def cli_cases(rng) -> list:
    """(family, text, secret) for every password flag: one shape per tool family."""
    pw = _pw
    out = [
        ("mysql", lambda p: f"mysql -h db.internal -u root -p{p} shop"),
        ("mysql-spaced", lambda p: f"mysqldump -u root -p {p} shop > dump.sql"),
        ("redis-cli", lambda p: f"redis-cli -h cache.internal -p 6379 -a {p} ping"),
        (
            "ldapsearch",
            lambda p: f"ldapsearch -x -H ldap://ldap.internal -D cn=admin,dc=ex,dc=org -w {p} -b dc=ex",
        ),
        ("openssl-pass", lambda p: f"openssl pkcs12 -export -in cert.pem -out cert.p12 -pass pass:{p}"),
        ("openssl-passin", lambda p: f"openssl rsa -in key.pem -passin pass:{p} -out plain.pem"),
        ("keytool", lambda p: f"keytool -list -v -keystore app.jks -storepass {p}"),
        ("keytool-keypass", lambda p: f"keytool -genkeypair -alias app -keypass {p} -keystore app.jks"),
        ("password-flag", lambda p: f"mongodump --uri mongodb://db.internal --username app --password {p}"),
        ("password-equals", lambda p: f"influx auth create --password={p}"),
        ("mongo", lambda p: f"mongosh --host db.internal -u admin -p {p} --authenticationDatabase admin"),
        ("sqlcmd", lambda p: f"sqlcmd -S tcp:db.internal,1433 -U sa -P {p} -Q 'select 1'"),
        ("zip", lambda p: f"zip -r -P {p} backup.zip ./data"),
        ("7z", lambda p: f"7z a -p{p} -mhe=on backup.7z ./data"),
        ("smbclient", lambda p: f"smbclient //files.internal/share -U bob%{p} -c ls"),
        ("ssh-keygen", lambda p: f"ssh-keygen -t ed25519 -N {p} -f ~/.ssh/deploy"),
        ("sqlplus", lambda p: f"sqlplus scott/{p}@//db.internal:1521/ORCLPDB1"),
        ("rman", lambda p: f"rman target sys/{p}@prod catalog rco/x{p}@rcat"),
    ]
    return [(name, make(secret), secret) for name, make in out for secret in (pw(rng),)]


def cases(rng: random.Random, per_family: int = 2) -> list:
    """(family, text, secret): the secret appears once in the text, in its plain form."""
    out = []
    for _ in range(per_family):
        out += cli_cases(rng)
        p = _pw(rng)
        host = rng.choice(["db.internal", "127.0.0.1", "mysql.prod.acme.io"])
        out.append(("go-dsn", f'dsn := "app:{p}@tcp({host}:3306)/shop?parseTime=true"', p))
        p = _pw(rng)
        out.append(("go-dsn-env", f"MYSQL_DSN=app:{p}@tcp({host}:3306)/shop", p))
        p = _pw(rng)
        out.append(("dsn-no-scheme", f"connecting with app:{p}@{host}:5432/app ...", p))
        pat = _r(rng, 52, B32)
        out.append(("azure-devops-pat", f"git clone https://{pat}@dev.azure.com/acme/shop/_git/api", pat))
        tok = _r(rng, 68, ALNUM + "_-")
        wid = str(rng.randrange(10**17, 10**18))
        out.append(
            (
                "discord-webhook",
                f"curl -H 'Content-Type: application/json' https://discord.com/api/webhooks/{wid}/{tok} -d @m.json",
                tok,
            )
        )
        tok = "AA" + _r(rng, 33, ALNUM + "_-")
        bot = str(rng.randrange(10**8, 10**10))
        out.append(
            (
                "telegram-bot",
                f"curl -s https://api.telegram.org/bot{bot}:{tok}/sendMessage -d chat_id=42",
                tok,
            )
        )
        tok = _r(rng, 6, string.ascii_lowercase + string.digits) + "x"
        out.append(
            (
                "zapier-hook",
                f"POST https://hooks.zapier.com/hooks/catch/{rng.randrange(10**6, 10**8)}/{tok}{_r(rng, 10)}/",
                tok,
            )
        )
        tok = "ya29.a0" + _r(rng, 120, ALNUM + "_-")
        out.append(("gcloud-token", f"$ gcloud auth print-access-token\n{tok}\n", tok))
        body = [_r(rng, 64, B64) for _ in range(3)] + [_r(rng, 20, B64) + "=="]
        mac = _r(rng, 64, "0123456789abcdef")
        ppk = (
            "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: deploy@ci\nPublic-Lines: 2\n"
            f"AAAAB3NzaC1yc2EAAAADAQABAAABAQ{_r(rng, 34, B64)}\n{_r(rng, 20, B64)}\n"
            f"Private-Lines: {len(body)}\n" + "\n".join(body) + f"\nPrivate-MAC: {mac}\n"
        )
        out.append(("putty-private-lines", ppk, body[1]))
        out.append(("putty-private-mac", ppk, mac))
        gh = "ghp_" + _r(rng, 36)
        cut = rng.randrange(8, 30)
        out.append(("github-token-two-lines", f"GITHUB_TOKEN={gh[:cut]}\n{gh[cut:]}\n", gh[cut:]))
        jwt = _jwt(rng)
        cut = rng.randrange(20, len(jwt) - 20)
        out.append(("jwt-lines", f"id_token:\n{jwt[:cut]}\n{jwt[cut:]}\n", jwt[cut:]))
        tok = _r(rng, 24)
        out.append(("bearer-neutral-env", f"UPSTREAM_HEADER=Bearer {tok}", tok))
    return out


# Text that only looks like the families: kept unchanged.
NEGATIVES = [
    "redis-cli -h cache.internal -p 6379 ping",
    "redis-cli -a $REDIS_PASSWORD --no-auth-warning info",
    "ldapsearch -x -H ldap://ldap.internal -b dc=example,dc=org '(uid=bob)'",
    "grep -w word notes.txt && ls -a /tmp",
    "nc -w 5 host.internal 80",
    "ssh -p 2222 deploy@bastion.internal",
    "docker run -p 8080:80 -a stdout nginx:1.25",
    "mysql -u root -p shop",
    "mysql -u root -p\nEnter password:",
    "openssl enc -aes-256-cbc -in a.txt -out a.enc -pass env:BACKUP_PASS",
    "openssl rsa -in key.pem -passin file:/run/secrets/pw -out plain.pem",
    "openssl req -new -key key.pem -out req.csr -subj /CN=example.com",
    "keytool -list -keystore app.jks -storepass:env STOREPASS",
    "keytool -importcert -file ca.pem -alias ca -keystore trust.jks -noprompt",
    "ssh-keygen -t ed25519 -N '' -f ~/.ssh/id_ed25519",
    "zip -r backup.zip ./data && unzip -l backup.zip",
    "7z x archive.7z -o/tmp/out",
    "sqlplus /nolog @setup.sql",
    'sqlplus "/ as sysdba"',
    "smbclient //files.internal/share -U bob",
    "git clone git@github.com:acme/shop.git",
    "scp build.tar.gz deploy@10.0.4.12:/srv/releases/",
    "image: nginx:1.25@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31",
    "npm install @acme/ui@2.3.1 lodash@4.17.21",
    "https://dev.azure.com/acme/shop/_git/api?path=/README.md",
    "git clone https://bob@dev.azure.com/acme/shop/_git/api",
    "https://discord.com/api/webhooks/{webhook.id}/{webhook.token}",
    "the Discord webhook URL looks like https://discord.com/api/webhooks/<id>/<token>",
    "curl https://api.telegram.org/bot<TOKEN>/getMe",
    "Telegram bot tokens look like 123456:ABC-DEF; see https://core.telegram.org/bots",
    "access tokens start with ya29. and expire after an hour",
    "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: aes256-cbc\nComment: me\nPublic-Lines: 2",
    "the .ppk file has Public-Lines and Private-Lines sections",
    "mailto:bob@example.com",
    "Listening on http://0.0.0.0:8080\nuser@host:~$ ls",
    "at 12:30@home/office we met",
    "see .git/hooks/pre-commit and .husky/hooks/commit-msg",
    "export UPSTREAM_HEADER=Bearer ${API_TOKEN}",
]

SPLIT_NEGATIVES = [
    ("$ redis-cli -h cache.internal -a", "(error) ERR wrong number of arguments"),
    ("GITHUB_TOKEN=", "is read from the environment"),
]


def matrix(scrubber, seed: int = 43, per_family: int = 2) -> dict:
    rng = random.Random(seed)
    seq = shapes34._sequence_scrubber(scrubber)
    total = caught = 0
    missed = []
    by_family: dict = {}
    for family, text, secret in cases(rng, per_family):
        for name in shapes34.TRANSFORMS:
            t, decode = shapes34._transform(name, text, secret, rng)
            for carrier in transforms.CARRIERS:
                carried = transforms.carry(t, carrier)
                if name == "split":
                    at = carried.find(secret)
                    out = "".join(seq([carried[:at], carried[at:]]))
                else:
                    out = scrubber.scrub_text(carried)
                ok = not transforms.leaks(out, secret, decode)
                total += 1
                caught += ok
                fam = by_family.setdefault(family, [0, 0])
                fam[0] += ok
                fam[1] += 1
                if not ok:
                    missed.append((family, name, carrier, carried, out))
    return {"caught": caught, "total": total, "missed": missed, "by_family": by_family}


def keep(scrubber, seed: int = 44) -> dict:
    rng = random.Random(seed)
    seq = shapes34._sequence_scrubber(scrubber)
    total = kept = 0
    changed = []
    for text in NEGATIVES:
        for name in shapes34.TRANSFORMS:
            if name in ("split", "hard-wrap"):
                continue
            word = max(text.split(), key=len)
            t, _ = shapes34._transform(name, text, word, rng)
            for carrier in transforms.CARRIERS:
                carried = transforms.carry(t, carrier)
                out = scrubber.scrub_text(carried)
                total += 1
                if out == carried:
                    kept += 1
                else:
                    changed.append((name, carrier, carried, out))
    for first, second in SPLIT_NEGATIVES:
        for carrier in transforms.CARRIERS:
            texts = [transforms.carry(first, carrier), second + "\n"]
            out = seq(texts)
            total += 1
            if out == texts:
                kept += 1
            else:
                changed.append(("split", carrier, texts, out))
    return {"kept": kept, "total": total, "changed": changed}


def main() -> int:
    from kirolearn.privacy.scrub import Scrubber

    result = matrix(Scrubber())
    print(f"issue #43 matrix: caught {result['caught']} / {result['total']}")
    for family, (ok, n) in sorted(result["by_family"].items()):
        print(f"  {family:<24} {ok:>4} / {n}")
    seen = set()
    for family, name, carrier, carried, _out in result["missed"]:
        if (family, name) not in seen:
            seen.add((family, name))
            print(f"  miss: {family} / {name} / {carrier}: {carried[:110]!r}")
    k = keep(Scrubber())
    print(f"look-alikes kept: {k['kept']} / {k['total']}")
    for name, carrier, carried, out in k["changed"][:30]:
        print(f"  changed: {name} / {carrier}: {str(carried)[:90]!r} -> {str(out)[:90]!r}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
