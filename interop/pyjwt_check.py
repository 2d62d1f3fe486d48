"""Interoperability with PyJWT (an implementation no one here wrote).

`prepare DIR`: make an Ed25519 key with `cryptography`, write its private
key (DIR/key.pem) and its JWK Set (DIR/jwks.json, kid "pyjwt-1", alg EdDSA)
for `gateway serve --trust-jwks`.

`check DIR PUBLIC ADMIN ADMIN_SECRET_FILE`: against a running `gateway
serve` (its public and admin faces, host:port, and the file holding its
admin secret), check that
* tokens PyJWT signs with that key are accepted by /whoami (which verifies
  through KmsClient::verify_jwt), with their claims;
* tampered, `alg: none`, HS256-keyed-with-the-public-key, expired and
  unknown-kid tokens are refused with 401 and an invalid_token challenge;
* a token from the admin face's POST /tokens verifies in PyJWT with the key
  taken from /.well-known/jwks.json (by kid, through PyJWKSet).
Exits non-zero with a message on the first failure.
"""

import hashlib
import hmac
import json
import time

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jwt.algorithms import OKPAlgorithm

from common import b64, expecter, main, minted, refused, request

KID = "pyjwt-1"


def prepare(directory: str) -> None:
    key = Ed25519PrivateKey.generate()
    with open(f"{directory}/key.pem", "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    jwk = json.loads(OKPAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": KID, "alg": "EdDSA", "use": "sig"})
    with open(f"{directory}/jwks.json", "w") as f:
        json.dump({"keys": [jwk]}, f)


expect = expecter("pyjwt")


def check(directory: str, public: str, admin: str, secret_file: str) -> None:
    with open(secret_file) as f:
        admin_secret = f.read().strip()
    with open(f"{directory}/key.pem", "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    public_raw = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    now = int(time.time())
    whoami = f"http://{public}/whoami"

    token = jwt.encode(
        {"sub": "py", "exp": now + 300}, key, algorithm="EdDSA", headers={"kid": KID}
    )
    status, _, body = request(whoami, token=token)
    expect(status == 200 and json.loads(body)["sub"] == "py", "a PyJWT token is accepted with its claims")

    header, payload, signature = token.split(".")
    tampered = ".".join([header, b64(b'{"sub":"mallory","exp":%d}' % (now + 300)), signature])
    none = ".".join([b64(json.dumps({"alg": "none", "kid": KID}).encode()), payload, ""])
    hs_header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": KID}).encode())
    hs_input = f"{hs_header}.{payload}".encode()
    hs256 = f"{hs_header}.{payload}." + b64(hmac.new(public_raw, hs_input, hashlib.sha256).digest())
    expired = jwt.encode(
        {"sub": "py", "exp": now - 3600}, key, algorithm="EdDSA", headers={"kid": KID}
    )
    wrong_kid = jwt.encode(
        {"sub": "py", "exp": now + 300}, key, algorithm="EdDSA", headers={"kid": "pyjwt-2"}
    )
    refused(expect, whoami, [
        ("tampered", tampered),
        ("alg none", none),
        ("HS256 keyed with the public key", hs256),
        ("expired", expired),
        ("unknown kid", wrong_kid),
    ])

    ours = minted(expect, admin, admin_secret, {"sub": "alice"})
    status, _, body = request(f"http://{public}/.well-known/jwks.json")
    expect(status == 200, "the JWKS is served")
    jwks = jwt.PyJWKSet.from_dict(json.loads(body))
    kid = jwt.get_unverified_header(ours)["kid"]
    signing_key = jwks[kid]
    claims = jwt.decode(ours, key=signing_key.key, algorithms=["EdDSA"])
    expect(claims["sub"] == "alice", "our token verifies in PyJWT with the key from our JWKS")
    tampered_ours = ours[:-4] + ("AAAA" if not ours.endswith("AAAA") else "BBBB")
    try:
        jwt.decode(tampered_ours, key=signing_key.key, algorithms=["EdDSA"])
        expect(False, "PyJWT refuses our token tampered")
    except jwt.InvalidTokenError:
        expect(True, "PyJWT refuses our token tampered")


if __name__ == "__main__":
    main(prepare, check, "pyjwt_check.py")
