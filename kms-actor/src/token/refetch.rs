//! [`JwksRefetch`]: what [`crate::KmsClient::verify_jwt`] asks when a
//! token names a `kid` its issuer's keys lack.

use std::future::Future;
use std::pin::Pin;

/// Asked by [`crate::KmsClient::verify_jwt`] when a token whose `iss`
/// names `issuer` carries a `kid` that issuer's keys lack (or names an
/// issuer with no keys at all): the implementation refetches the issuer's
/// JWK Set if its own rules allow (one fetch in flight per issuer, a
/// cooldown between fetches) and resolves once the keys are replaced or it
/// gives up; the lookup is then made once more. It must bound its own wait
/// (a fetch timeout): the token's request waits on it.
pub trait JwksRefetch: Send + Sync + 'static {
    /// Refetches `issuer`'s keys if allowed, for a token naming `kid`;
    /// resolves at once for an issuer it does not keep.
    fn refetch<'a>(
        &'a self,
        issuer: &'a str,
        kid: &'a str,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;
}
