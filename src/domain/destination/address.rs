//! Which addresses a destination may reach: a public one, unless `allow_private_destinations`
//! is set. Checked twice: on a URL whose host is an IP address when the destination is made
//! ([`check_url`]), and on every address a host name resolves to before it is dialled
//! (`delivery/client.rs`, with [`is_private`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// Whether `ip` is an address a destination must not reach unless `allow_private_destinations`
/// is set: anything but a public unicast address. Loopback, the private ranges, link-local (the
/// cloud's metadata service at 169.254.169.254 among them), CGNAT's shared range, unspecified,
/// broadcast, multicast and reserved; in IPv6 also unique-local, link-local, and an IPv4 address
/// inside an IPv6 one (mapped, compatible, NAT64), judged as that IPv4 address.
#[must_use]
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => is_private_v6(v6),
    }
}

fn is_private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || a >= 240 // reserved
}

fn is_private_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_private_v4(v4);
    }
    let embedded_v4 = |hi: u16, lo: u16| {
        let [first, second] = hi.to_be_bytes();
        let [third, fourth] = lo.to_be_bytes();
        Ipv4Addr::new(first, second, third, fourth)
    };
    // IPv4-compatible (`::a.b.c.d`, deprecated) and NAT64 (`64:ff9b::a.b.c.d`).
    if s[..6] == [0; 6] && !(s[6] == 0 && s[7] <= 1) {
        return is_private_v4(embedded_v4(s[6], s[7]));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_private_v4(embedded_v4(s[6], s[7]));
    }
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local, deprecated
        || s[0] == 0x2001 && s[1] == 0x0db8 // documentation
}

/// The refusal of an address that is not public.
#[must_use]
pub fn private_address(field: &'static str, address: &str) -> Error {
    Error::field(
        Code::InvalidField,
        field,
        format!(
            "{field} points at {address}, a loopback, private or link-local address; \
             destinations must be public (set allow_private_destinations = true for private \
             networks and tests)"
        ),
    )
}

/// The longest URL (or URL template) a destination takes.
pub const MAX_URL_LEN: usize = 2048;

/// Checks a destination's URL: `https://` (or `http://` when private addresses are allowed),
/// a host, no user name or password, and, when its host is an IP address, a public one unless
/// `allow_private`. A host name is checked after it resolves, before each send.
pub fn check_url(field: &'static str, text: &str, allow_private: bool) -> Result<url::Url, Error> {
    let bad = |why: &str| {
        Error::field(
            Code::InvalidField,
            field,
            format!("{field} {why}, got {}", quoted(text)),
        )
    };
    if text.len() > MAX_URL_LEN || !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad(&format!(
            "must be at most {MAX_URL_LEN} visible ASCII characters"
        )));
    }
    let url = url::Url::parse(text).map_err(|e| bad(&format!("is not a URL ({e})")))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_private => {}
        _ => {
            return Err(bad(if allow_private {
                "must be an https:// or http:// URL"
            } else {
                "must be an https:// URL (http:// only with allow_private_destinations = true)"
            }));
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("must not carry a user name or password"));
    }
    let ip = match url.host() {
        None => return Err(bad("must name a host")),
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
        Some(url::Host::Domain(_)) => None,
    };
    if let Some(ip) = ip {
        if !allow_private && is_private(ip) {
            return Err(private_address(field, &ip.to_string()));
        }
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_are_refused_and_public_ones_are_not() {
        for private in [
            "127.0.0.1",
            "127.255.0.1",
            "10.0.0.1",
            "10.255.255.255",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "::127.0.0.1",
        ] {
            assert!(is_private(private.parse().unwrap()), "{private}");
        }
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "9.255.255.255",
            "11.0.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.167.255.255",
            "192.169.0.1",
            "169.253.255.255",
            "169.255.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "223.255.255.255",
            "2a03:2880:f12f:83:face:b00c:0:25de",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(!is_private(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn urls_are_https_with_a_public_host() {
        assert!(check_url("url", "https://example.com/x", false).is_ok());
        assert!(check_url("url", "https://8.8.8.8/x", false).is_ok());
        for (bad, says) in [
            ("http://example.com/x", "https://"),
            ("ftp://example.com/x", "https://"),
            ("https://127.0.0.1/x", "loopback"),
            ("https://10.1.2.3/x", "loopback"),
            ("https://169.254.169.254/latest", "loopback"),
            ("https://[::1]/x", "loopback"),
            ("https://[::ffff:7f00:1]/x", "loopback"),
            ("https://user:pw@example.com/x", "user name"),
            ("not a url", "visible ASCII"),
            ("https://", "host"),
        ] {
            let e = check_url("url", bad, false).unwrap_err();
            assert_eq!(e.field, Some("url"), "{bad}");
            assert!(e.message.contains(says), "{bad}: {}", e.message);
        }
        assert!(check_url("url", "http://127.0.0.1:9/x", true).is_ok());
        assert!(check_url("url", "https://[::1]/x", true).is_ok());
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN - 20));
        assert_eq!(long.len(), MAX_URL_LEN);
        assert!(check_url("url", &long, false).is_ok());
        assert!(check_url("url", &format!("{long}a"), false).is_err());
    }
}
