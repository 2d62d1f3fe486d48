"""What the interop checks share: base64url, HTTP against a running
`gateway serve`, and a check that stops at the first failure."""

import base64
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
