//! Which address a request comes from, for the limits and throttles that count per client.
//!
//! The TCP peer, unless the peer is one of `trusted_proxies`: then the client is the right-most
//! address of `X-Forwarded-For` that is not itself a trusted proxy (each proxy appends the
//! address it was reached from, so everything left of the last untrusted entry was written by
//! the client and proves nothing). A header from an untrusted peer is ignored, so nobody can
//! pick their own address by sending one.

use std::net::IpAddr;

use ipnet::IpNet;

/// An address range such as `10.0.0.0/8`, `::1` or `127.0.0.1` (a single address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr(IpNet);

impl Cidr {
    /// Parses `address` or `address/prefix`; the message says what is wrong.
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let (address, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let address: IpAddr = address
            .parse()
            .map_err(|_| format!("{text:?} is not an IP address or a range such as 10.0.0.0/8"))?;
        let Some(prefix) = prefix else {
            return Ok(Cidr(IpNet::from(address)));
        };
        let over = || {
            let bits = if address.is_ipv4() { 32 } else { 128 };
            format!("{text:?} has a prefix length over {bits}")
        };
        let prefix = prefix.parse::<u8>().map_err(|_| over())?;
        IpNet::new(address, prefix).map(Cidr).map_err(|_| over())
    }

    /// Whether `address` is in the range (an IPv4-mapped IPv6 address counts as its IPv4).
    #[must_use]
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = match address {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
            v4 @ IpAddr::V4(_) => v4,
        };
        self.0.contains(&address)
    }
}

/// The key an address is counted under by the per-client limits (connections, clicks, logins):
/// an IPv4 address (also one written IPv4-mapped), or an IPv6 address's /64, since one client
/// (a home, a server) is given a whole /64 and can pick any address in it.
#[must_use]
pub fn address_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((v6.to_bits() & !u128::from(u64::MAX)).into()),
        },
        v4 @ IpAddr::V4(_) => v4,
    }
}

/// The client's address: see the module notes.
#[must_use]
pub fn client_ip(peer: IpAddr, forwarded_for: Option<&str>, trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |a: IpAddr| trusted.iter().any(|c| c.contains(a));
    if !is_trusted(peer) {
        return peer;
    }
    let Some(header) = forwarded_for else {
        return peer;
    };
    let mut client = peer;
    for entry in header.rsplit(',') {
        let Ok(address) = entry.trim().parse::<IpAddr>() else {
            // Garbage where an address should be: whoever wrote it is not to be believed, and
            // the last address a trusted proxy vouched for is the client.
            break;
        };
        client = address;
        if !is_trusted(address) {
            break;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ranges_hold_exactly_their_addresses() {
        let lan = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(lan.contains(ip("10.1.0.0")) && lan.contains(ip("10.1.255.255")));
        assert!(!lan.contains(ip("10.0.255.255")) && !lan.contains(ip("10.2.0.0")));
        assert!(lan.contains(ip("::ffff:10.1.2.3")));
        // Bits past the prefix are ignored, as a range is often written from one of its hosts.
        let written_from_a_host = Cidr::parse("10.1.2.3/16").unwrap();
        assert!(written_from_a_host.contains(ip("10.1.0.0")));
        assert!(!written_from_a_host.contains(ip("10.2.0.0")));
        let one = Cidr::parse("127.0.0.1").unwrap();
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
        assert!(
            Cidr::parse("0.0.0.0/0")
                .unwrap()
                .contains(ip("203.0.113.9"))
        );
        let v6 = Cidr::parse("fd00::/8").unwrap();
        assert!(v6.contains(ip("fdff::1")) && !v6.contains(ip("fe00::1")));
        assert!(!v6.contains(ip("10.1.2.3")));
        assert!(Cidr::parse("10.0.0.0/32").is_ok());
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("::/128").is_ok());
        assert!(Cidr::parse("::/129").is_err());
        assert!(Cidr::parse("localhost").is_err());
    }

    #[test]
    fn an_ipv6_address_counts_as_its_64() {
        assert_eq!(
            address_key(ip("2001:db8:1:2:ffff::7")),
            ip("2001:db8:1:2::")
        );
        assert_eq!(address_key(ip("2001:db8:1:2::")), ip("2001:db8:1:2::"));
        assert_ne!(address_key(ip("2001:db8:1:3::1")), ip("2001:db8:1:2::"));
        assert_eq!(address_key(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
        assert_eq!(address_key(ip("192.0.2.1")), ip("192.0.2.1"));
    }

    #[test]
    fn the_header_counts_only_from_a_trusted_peer() {
        let proxies = [
            Cidr::parse("127.0.0.1").unwrap(),
            Cidr::parse("10.0.0.0/8").unwrap(),
        ];
        let header = Some("198.51.100.7, 203.0.113.5, 10.0.0.2");
        // An untrusted peer's header is ignored.
        assert_eq!(
            client_ip(ip("192.0.2.1"), header, &proxies),
            ip("192.0.2.1")
        );
        // Through trusted proxies: the right-most untrusted entry, not the left-most (which
        // the client wrote itself).
        assert_eq!(
            client_ip(ip("127.0.0.1"), header, &proxies),
            ip("203.0.113.5")
        );
        // No header, or nothing trusted: the peer.
        assert_eq!(client_ip(ip("127.0.0.1"), None, &proxies), ip("127.0.0.1"));
        assert_eq!(client_ip(ip("127.0.0.1"), header, &[]), ip("127.0.0.1"));
        // Garbage stops the walk at the last vouched-for address.
        assert_eq!(
            client_ip(
                ip("127.0.0.1"),
                Some("203.0.113.5, nonsense, 10.0.0.2"),
                &proxies
            ),
            ip("10.0.0.2")
        );
        // Every entry trusted: the left-most.
        assert_eq!(
            client_ip(ip("127.0.0.1"), Some("10.0.0.3, 10.0.0.2"), &proxies),
            ip("10.0.0.3")
        );
    }
}
