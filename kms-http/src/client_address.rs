//! [`ClientAddress`]: the address of the client a request comes from,
//! behind the proxies an operator trusts: the peer itself, unless the peer
//! is one of them; then the rightmost `X-Forwarded-For` entry that is not
//! itself a trusted proxy, walking left only through trusted addresses
//! (what NGINX's `realip` module does with `real_ip_recursive on`).
//!
//! The peer stands when it is not trusted, when the header is absent, or
//! when an entry the walk reads is not an IP address (a port, `unknown`, an
//! obfuscated RFC 7239 node, text that is not ASCII): a header that does
//! not parse names nobody. If every entry is trusted, the leftmost stands.
//! `Forwarded` (RFC 7239) is not read. Addresses are compared in their
//! canonical form (an IPv4-mapped IPv6 address as IPv4).

use std::net::IpAddr;

use http::HeaderMap;
use ipnet::IpNet;

/// The forwarding proxies a service trusts (module docs).
#[derive(Debug, Clone, Default)]
pub struct ClientAddress {
    trusted: Vec<IpNet>,
}

impl ClientAddress {
    /// Trusts the proxies in `trusted` (networks or single addresses as
    /// `/32` and `/128` networks; an IPv4-mapped IPv6 network matches
    /// nothing, give it as IPv4).
    pub fn new(trusted: Vec<IpNet>) -> Self {
        ClientAddress { trusted }
    }

    /// Whether `address` is a trusted proxy's.
    pub fn is_trusted(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.trusted.iter().any(|net| net.contains(&address))
    }

    /// The client's address for a request from `peer` with `headers`
    /// (module docs).
    pub fn of(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.is_trusted(peer) {
            return peer;
        }
        let mut leftmost = None;
        // The header's lines in order; entries right to left.
        for line in headers.get_all("x-forwarded-for").iter().rev() {
            let Ok(line) = line.to_str() else {
                return peer;
            };
            for entry in line.rsplit(',') {
                let Ok(address) = entry.trim().parse::<IpAddr>() else {
                    return peer;
                };
                let address = address.to_canonical();
                if !self.is_trusted(address) {
                    return address;
                }
                leftmost = Some(address);
            }
        }
        leftmost.unwrap_or(peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    fn headers(lines: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for line in lines {
            h.append(
                "x-forwarded-for",
                HeaderValue::from_str(line).expect("value"),
            );
        }
        h
    }

    #[test]
    fn the_rightmost_untrusted_entry_behind_trusted_proxies_is_the_client() {
        let addr = ClientAddress::new(vec![
            "10.0.0.0/8".parse().expect("net"),
            "2001:db8:ffff::/48".parse().expect("net"),
        ]);
        let proxy = ip("10.1.2.3");
        // A client's own claim on the left is not believed.
        assert_eq!(
            addr.of(proxy, &headers(&["1.1.1.1, 203.0.113.9"])),
            ip("203.0.113.9")
        );
        // Through two trusted hops, over two header lines.
        assert_eq!(
            addr.of(proxy, &headers(&["1.1.1.1, 203.0.113.9", "10.9.9.9"])),
            ip("203.0.113.9")
        );
        assert_eq!(
            addr.of(proxy, &headers(&["2001:db8:1::5 , 2001:db8:ffff::1"])),
            ip("2001:db8:1::5")
        );
        // Every entry trusted: the leftmost.
        assert_eq!(
            addr.of(proxy, &headers(&["10.0.0.7, 10.0.0.8"])),
            ip("10.0.0.7")
        );
        // A mapped peer is its IPv4 address.
        assert_eq!(
            addr.of(ip("::ffff:10.1.2.3"), &headers(&["198.51.100.1"])),
            ip("198.51.100.1")
        );
    }

    #[test]
    fn the_peer_stands_unless_a_trusted_proxy_sent_a_header_that_parses() {
        let addr = ClientAddress::new(vec!["10.0.0.0/8".parse().expect("net")]);
        let (stranger, proxy) = (ip("198.51.100.7"), ip("10.1.2.3"));
        assert_eq!(addr.of(stranger, &headers(&["203.0.113.9"])), stranger);
        assert_eq!(addr.of(proxy, &HeaderMap::new()), proxy);
        for bad in ["203.0.113.9:443", "unknown", "_hidden", "", "203.0.113.9,"] {
            assert_eq!(addr.of(proxy, &headers(&[bad])), proxy, "{bad:?}");
        }
        // Only what the walk reads must parse: the client is found first.
        assert_eq!(
            addr.of(proxy, &headers(&["junk, 203.0.113.9"])),
            ip("203.0.113.9")
        );
        assert_eq!(
            ClientAddress::default().of(proxy, &headers(&["203.0.113.9"])),
            proxy
        );
    }
}
