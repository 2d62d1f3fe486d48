"""What the interop checks share: base64url, HTTP against a running
`gateway serve`, and a check that stops at the first failure."""

import base64
import json
import sys
import urllib.error
import urllib.request


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def request(url: str, method: str = "GET", token: str = None, body: bytes = None):
    req = urllib.request.Request(url, method=method, data=body)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def expecter(name: str):
    """A check that prints `name interop: ok: what`, or exits non-zero."""

    def expect(condition: bool, what: str) -> None:
        if not condition:
            print(f"{name} interop: FAILED: {what}", file=sys.stderr)
            sys.exit(1)
        print(f"{name} interop: ok: {what}")

    return expect


def refused(expect, whoami: str, bad_tokens) -> None:
    """Each `(name, token)` of `bad_tokens` is refused by `whoami` with 401
    and an `invalid_token` challenge."""
    for name, bad in bad_tokens:
        status, headers, _ = request(whoami, token=bad)
        challenge = headers.get("www-authenticate") or headers.get("WWW-Authenticate") or ""
        expect(
            status == 401 and 'error="invalid_token"' in challenge,
            f"a {name} token is refused with 401 invalid_token ({challenge})",
        )


def minted(expect, admin: str, admin_secret: str, claims: dict) -> str:
    """A token the admin face's POST /tokens issues for `claims`."""
    status, _, body = request(
        f"http://{admin}/tokens",
        method="POST",
        token=admin_secret,
        body=json.dumps(claims).encode(),
    )
    expect(status == 200, "the admin face issues a token")
    return json.loads(body)["token"]


def main(prepare, check, script: str) -> None:
    """`script prepare DIR` or `script check DIR PUBLIC ADMIN ADMIN_SECRET_FILE`."""
    if sys.argv[1:2] == ["prepare"] and len(sys.argv) == 3:
        prepare(sys.argv[2])
    elif sys.argv[1:2] == ["check"] and len(sys.argv) == 6:
        check(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        sys.exit(f"usage: {script} prepare DIR | check DIR PUBLIC ADMIN ADMIN_SECRET_FILE")
