"""Seeds for the fuzz corpora (fuzz/corpus/<target>/seed-*): testdata's
RFC 8037 example, and tokens and JWK Sets shaped as the interop tests'
(PyJWT-style EdDSA tokens with kid and exp), signed by RFC 8032 §7.1 TEST
1's key (its secret is public in the RFC), plus claims sets, key ids and
small vector files.

Run from the repository root with a Python that has `cryptography`
(PyPI): python3 -m venv /tmp/v && /tmp/v/bin/pip install cryptography &&
/tmp/v/bin/python fuzz/seeds.py .
"""
import base64, json, os, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

root = sys.argv[1]
def b64(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
sk = Ed25519PrivateKey.from_private_bytes(bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"))
rfc = json.load(open(os.path.join(root, "testdata/rfc8037_appendix_a.json")))
def token(header, claims):
    h = b64(json.dumps(header, separators=(",", ":")).encode())
    c = b64(json.dumps(claims, separators=(",", ":")).encode())
    sig = sk.sign(f"{h}.{c}".encode())
    return f"{h}.{c}.{b64(sig)}"
tokens = {
  "rfc8037_a4": rfc["jws"],
  "valid": token({"alg": "EdDSA", "kid": "test-1"}, {"sub": "alice", "exp": 4102444800}),
  "valid_ed25519": token({"alg": "Ed25519", "kid": "test-1", "typ": "JWT"}, {"sub": "bob", "exp": 4102444800, "aud": "api", "iss": "https://issuer.example", "iat": 1700000000, "nbf": 1700000000}),
  "expired": token({"alg": "EdDSA", "kid": "test-1"}, {"sub": "alice", "exp": 1}),
  "unknown_kid": token({"alg": "EdDSA", "kid": "nobody"}, {"sub": "alice", "exp": 4102444800}),
  "keystore_kid": token({"alg": "EdDSA", "kid": "kms:acme:tokens:ed25519:5b769b61-0f38-4885-a628-8294ae7737e8:v1"}, {"sub": "a", "exp": 4102444800}),
  "none": b64(b'{"alg":"none","kid":"test-1"}') + "." + b64(b'{"sub":"a"}') + ".",
  "hs256": b64(b'{"alg":"HS256","kid":"test-1"}') + "." + b64(b'{"sub":"a"}') + "." + b64(b"\0" * 32),
  "crit": token({"alg": "EdDSA", "kid": "test-1", "crit": ["b64"], "b64": False}, {"sub": "a"}),
  "dup_claims": b64(b'{"alg":"EdDSA","kid":"test-1"}') + "." + b64(b'{"sub":"a","sub":"b","exp":4102444800}') + "." + b64(b"\0" * 64),
}
def write(target, name, data):
    d = os.path.join(root, "fuzz/corpus", target); os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "seed-" + name), "wb").write(data if isinstance(data, bytes) else data.encode())
for name, t in tokens.items():
    write("jws", name, t)
    write("bearer", name, "Bearer " + t)
write("bearer", "two_headers", "Bearer " + tokens["valid"] + "\nBearer " + tokens["valid"])
write("bearer", "basic", "Basic YWxpY2U6c2VjcmV0")
write("bearer", "lowercase", "bearer " + tokens["valid"])
claims = {
  "minimal": {"sub": "a"},
  "full": {"sub": "alice", "exp": 4102444800, "nbf": 1700000000, "iat": 1700000000, "iss": "https://issuer.example", "aud": ["api", "other"], "jti": "0123456789abcdef"},
  "fractions": {"exp": 1700000000.5, "nbf": 1.0e9, "iat": 1699999999.9},
  "wrong_types": {"exp": "soon", "aud": 5, "iss": ["x"]},
  "escapes": {"sub": "a\u0000b\\\"c\u00e9\ud83d\ude00"},
}
for name, c in claims.items():
    write("claims", name, json.dumps(c))
write("claims", "dup", '{"sub":"a","s\\u0075b":"b"}')
write("claims", "deep", "[" * 64 + "]" * 64)
pub = b64(sk.public_key().public_bytes_raw())
sets = {
  "rfc8037": {"keys": [dict(rfc["public_jwk"], kid="a2")]},
  "mixed": {"keys": [
     {"kty": "OKP", "crv": "Ed25519", "x": pub, "kid": "test-1", "alg": "EdDSA", "use": "sig", "key_ops": ["verify"]},
     {"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "rsa", "alg": "RS256"},
     {"kty": "EC", "crv": "P-256", "x": pub, "y": pub, "kid": "ec"},
     {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
     {"kty": "OKP", "crv": "X25519", "x": pub, "kid": "ecdh"}]},
  "private": {"keys": [dict(rfc["private_jwk"], kid="leak")]},
  "dup_kid": {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": pub, "kid": "k"}, {"kty": "OKP", "crv": "Ed25519", "x": pub, "kid": "k"}]},
}
for name, s in sets.items():
    write("jwk_set", name, json.dumps(s))
for name, kid in {
    "valid": "kms:acme:tokens:ed25519:5b769b61-0f38-4885-a628-8294ae7737e8:v1",
    "v0": "kms:acme:tokens:ed25519:5b769b61-0f38-4885-a628-8294ae7737e8:v0",
    "long": "kms:" + "t" * 64 + ":p:ed25519:5b769b61-0f38-4885-a628-8294ae7737e8:v4294967295",
    "colon": "kms:a:b:c:ed25519:5b769b61-0f38-4885-a628-8294ae7737e8:v1",
}.items():
    write("key_id", name, kid)
for name in ["speccheck_cases.json", "rfc8032_7.1_ed25519_vectors.json"]:
    write("verify_file_input", name, open(os.path.join(root, "testdata", name), "rb").read())
write("verify_file_input", "sign_input_lines", b"".join(open(os.path.join(root, "testdata/ed25519_sign.input_1024.txt"), "rb").readlines()[:4]))
print("seeds written")
