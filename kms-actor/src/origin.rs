//! [`Origin`]: where a verify request comes from, as the embedder chooses
//! to name it (a client's address, a tenant, a connection), so that the
//! coalescing policy can keep the requests of a source whose signatures
//! have been failing out of other sources' batches (`dispatch/origins.rs`).
//!
//! An origin is a 64-bit hash of the embedder's key under a key drawn at
//! random once per process (std's `RandomState`, SipHash-1-3): a client
//! cannot choose its key to land on another's record, and two processes
//! hash the same key differently. It says nothing about trust: a verdict
//! is the same whatever origin a request carries.

use std::hash::{BuildHasher, Hash, RandomState};
use std::net::IpAddr;
use std::sync::OnceLock;

/// The source of a verify request (module docs). Pass it with
/// [`crate::KmsClient::for_origin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Origin(u64);

/// The process's hash key for origins.
fn hasher() -> &'static RandomState {
    static HASHER: OnceLock<RandomState> = OnceLock::new();
    HASHER.get_or_init(RandomState::new)
}

impl Origin {
    /// The origin named by `key`, any hashable value the embedder chooses
    /// (equal keys give equal origins within this process).
    pub fn new(key: impl Hash) -> Self {
        Origin(hasher().hash_one(key))
    }

    /// The origin of a client at `address`: an IPv4 address as a whole,
    /// an IPv6 address by its /64 (the prefix one subscriber, one LAN,
    /// gets: RFC 6177 §2 and RFC 7421), and an IPv4-mapped IPv6 address
    /// (`::ffff:a.b.c.d`) as the IPv4 address it maps.
    pub fn from_ip(address: IpAddr) -> Self {
        match address {
            IpAddr::V4(v4) => Origin::new((4u8, v4.octets())),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Origin::new((4u8, v4.octets())),
                None => {
                    let s = v6.segments();
                    Origin::new((6u8, [s[0], s[1], s[2], s[3]]))
                }
            },
        }
    }

    /// The 64-bit hash (the origin table's key).
    pub(crate) fn hash(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_client_is_keyed_by_its_64_and_a_mapped_ipv4_as_ipv4() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("address");
        assert_eq!(
            Origin::from_ip(ip("2001:db8:1:2:aaaa::1")),
            Origin::from_ip(ip("2001:db8:1:2:bbbb::2"))
        );
        assert_ne!(
            Origin::from_ip(ip("2001:db8:1:2::1")),
            Origin::from_ip(ip("2001:db8:1:3::1"))
        );
        assert_eq!(
            Origin::from_ip(ip("::ffff:192.0.2.7")),
            Origin::from_ip(ip("192.0.2.7"))
        );
        assert_ne!(
            Origin::from_ip(ip("192.0.2.7")),
            Origin::from_ip(ip("192.0.2.8"))
        );
        assert_eq!(Origin::new("tenant-a"), Origin::new("tenant-a"));
        assert_ne!(Origin::new("tenant-a"), Origin::new("tenant-b"));
    }
}
