"""ML-DSA interoperability with Python's `cryptography` (48 or newer signs
and verifies ML-DSA; an implementation no one here wrote).

`prepare DIR`: make an ML-DSA-65 key, write its seed (DIR/key.seed, the
32 bytes RFC 9964 calls `priv`) and its public `AKP` JWK Set
(DIR/jwks.json, kid "py-mldsa-1", alg ML-DSA-65) for `gateway serve
--trust-jwks`.

`check DIR PUBLIC ADMIN ADMIN_SECRET_FILE`: against a running `gateway
serve --alg ML-DSA-65`, check that
* a JWS Python signs with that key (empty context, as RFC 9964 requires)
  is accepted by /whoami with its claims; tampered, unknown-kid and
  ML-DSA-44-labelled ones (which the gateway refuses at the signature's
  length, before the key's `alg`) are refused with 401 invalid_token;
* a token from the admin face's POST /tokens carries alg ML-DSA-65 and
  verifies in Python under the `AKP` key its kid names in
  /.well-known/jwks.json, and fails once tampered.
Exits non-zero with a message on the first failure.
"""

import json
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.mldsa import (
    MLDSA65PrivateKey,
    MLDSA65PublicKey,
)

from common import b64, expecter, main, minted, refused, request, unb64

KID = "py-mldsa-1"
expect = expecter("ml-dsa")


def prepare(directory: str) -> None:
    key = MLDSA65PrivateKey.generate()
    with open(f"{directory}/key.seed", "wb") as f:
        f.write(key.private_bytes_raw())
    public = key.public_key().public_bytes_raw()
    jwk = {"kty": "AKP", "alg": "ML-DSA-65", "pub": b64(public), "kid": KID, "use": "sig"}
    with open(f"{directory}/jwks.json", "w") as f:
        json.dump({"keys": [jwk]}, f)


def sign(key, header: dict, claims: dict) -> str:
    signing_input = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
    return signing_input + "." + b64(key.sign(signing_input.encode()))


def check(directory: str, public: str, admin: str, secret_file: str) -> None:
    with open(secret_file) as f:
        admin_secret = f.read().strip()
    with open(f"{directory}/key.seed", "rb") as f:
        key = MLDSA65PrivateKey.from_seed_bytes(f.read())
    now = int(time.time())
    whoami = f"http://{public}/whoami"

    token = sign(key, {"alg": "ML-DSA-65", "kid": KID}, {"sub": "py", "exp": now + 300})
    status, _, body = request(whoami, token=token)
    expect(status == 200 and json.loads(body)["sub"] == "py", "a Python ML-DSA-65 token is accepted with its claims")
    header, _, signature = token.split(".")
    tampered = ".".join([header, b64(b'{"sub":"mallory","exp":%d}' % (now + 300)), signature])
    wrong_kid = sign(key, {"alg": "ML-DSA-65", "kid": "py-mldsa-2"}, {"sub": "py", "exp": now + 300})
    relabelled = sign(key, {"alg": "ML-DSA-44", "kid": KID}, {"sub": "py", "exp": now + 300})
    refused(expect, whoami, [("tampered", tampered), ("unknown kid", wrong_kid), ("ML-DSA-44-labelled", relabelled)])

    ours = minted(expect, admin, admin_secret, {"sub": "alice"})
    header, payload, signature = ours.split(".")
    protected = json.loads(unb64(header))
    expect(protected["alg"] == "ML-DSA-65", f"our token's alg is ML-DSA-65 ({protected['alg']})")
    status, _, body = request(f"http://{public}/.well-known/jwks.json")
    expect(status == 200, "the JWKS is served")
    jwk = next((k for k in json.loads(body)["keys"] if k["kid"] == protected["kid"]), None)
    expect(jwk is not None, f"our JWKS holds our token's kid {protected['kid']}")
    expect(jwk["kty"] == "AKP" and jwk["alg"] == "ML-DSA-65" and "priv" not in jwk, "our JWK is a public AKP key")
    verifier = MLDSA65PublicKey.from_public_bytes(unb64(jwk["pub"]))
    signing_input = f"{header}.{payload}".encode()
    try:
        verifier.verify(unb64(signature), signing_input)
        verified = True
    except InvalidSignature:
        verified = False
    expect(
        verified and json.loads(unb64(payload))["sub"] == "alice",
        "our token verifies in Python with the key from our JWKS",
    )
    forged = bytearray(unb64(signature))
    forged[0] ^= 1
    try:
        verifier.verify(bytes(forged), signing_input)
        expect(False, "Python refuses our token tampered")
    except InvalidSignature:
        expect(True, "Python refuses our token tampered")


if __name__ == "__main__":
    main(prepare, check, "mldsa_check.py")
