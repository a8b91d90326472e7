//! Which addresses a destination may reach: a public one, unless `allow_private_destinations`
//! is set. Checked twice: on a URL whose host is an IP address when the destination is made
//! ([`check_url`]), and on every address a host name resolves to before it is dialled
//! (`delivery/client.rs`, with [`is_private`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

use super::given::Field;
use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// Whether `ip` is an address a destination must not reach unless `allow_private_destinations`
/// is set: one in a range of IANA's IPv4 and IPv6 special-purpose address registries, or
/// multicast. Loopback, the private ranges, link-local (the cloud's metadata service at
/// 169.254.169.254 among them), CGNAT's shared range, documentation, benchmarking, reserved;
/// even the registries' few globally reachable anycast ranges, since no conversion receiver
/// lives there. An IPv4 address inside an IPv6 one, mapped (`::ffff:a.b.c.d`) or behind the
/// well-known NAT64 prefix (`64:ff9b::a.b.c.d`, what DNS64 answers on an IPv6-only host), is
/// judged as that IPv4 address.
#[must_use]
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => SPECIAL_V4.iter().any(|net| net.contains(&v4)),
        IpAddr::V6(v6) if EMBEDS_V4.iter().any(|net| net.contains(&v6)) => {
            let [.., a, b, c, d] = v6.octets();
            is_private(IpAddr::V4(Ipv4Addr::new(a, b, c, d)))
        }
        IpAddr::V6(v6) => SPECIAL_V6.iter().any(|net| net.contains(&v6)),
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), prefix)
}

const fn v6(s: [u16; 8], prefix: u8) -> Ipv6Net {
    let address = Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]);
    Ipv6Net::new_assert(address, prefix)
}

/// IANA's IPv4 Special-Purpose Address Registry, and multicast.
const SPECIAL_V4: [Ipv4Net; 18] = [
    v4(0, 0, 0, 0, 8),       // "this network"
    v4(10, 0, 0, 0, 8),      // private
    v4(100, 64, 0, 0, 10),   // shared address space (CGNAT)
    v4(127, 0, 0, 0, 8),     // loopback
    v4(169, 254, 0, 0, 16),  // link-local
    v4(172, 16, 0, 0, 12),   // private
    v4(192, 0, 0, 0, 24),    // IETF protocol assignments
    v4(192, 0, 2, 0, 24),    // documentation (TEST-NET-1)
    v4(192, 31, 196, 0, 24), // AS112
    v4(192, 52, 193, 0, 24), // AMT
    v4(192, 88, 99, 0, 24),  // 6to4 relay anycast, deprecated
    v4(192, 168, 0, 0, 16),  // private
    v4(192, 175, 48, 0, 24), // AS112 direct delegation
    v4(198, 18, 0, 0, 15),   // benchmarking
    v4(198, 51, 100, 0, 24), // documentation (TEST-NET-2)
    v4(203, 0, 113, 0, 24),  // documentation (TEST-NET-3)
    v4(224, 0, 0, 0, 4),     // multicast
    v4(240, 0, 0, 0, 4),     // reserved, with the broadcast address
];

/// IPv6 ranges whose last 32 bits are an IPv4 address, judged as that address.
const EMBEDS_V4: [Ipv6Net; 2] = [
    v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96),    // IPv4-mapped
    v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96), // NAT64, well-known prefix
];

/// IANA's IPv6 Special-Purpose Address Registry, and multicast.
const SPECIAL_V6: [Ipv6Net; 14] = [
    v6([0; 8], 96), // unspecified, loopback, and IPv4-compatible (deprecated)
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), // NAT64, local use
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), // discard-only
    v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64), // dummy prefix
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23), // IETF protocol assignments (Teredo, ORCHID, AS112, ...)
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), // documentation
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16), // 6to4
    v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0], 48), // AS112 direct delegation
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), // documentation
    v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16), // segment routing (SRv6) SIDs
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), // unique local
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), // link-local
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), // site-local, deprecated
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), // multicast
];

/// The refusal of an address that is not public.
#[must_use]
pub fn private_address(field: &'static str, address: &str) -> Error {
    Error::field(
        Code::InvalidField,
        field,
        format!(
            "{field} points at {address}, a loopback, private or link-local address or another \
             special-purpose one; destinations must be public (set \
             allow_private_destinations = true for private networks and tests)"
        ),
    )
}

/// The longest URL (or URL template) a destination takes.
pub const MAX_URL_LEN: usize = 2048;

/// The longest URL a postback sends, once its template's macros are filled: each macro's value
/// percent-encoded (a Cyrillic campaign name of 256 characters is 1,536 bytes), so well past
/// the template's bound. A receiver that takes less answers `414`, which the delivery shows.
pub const MAX_FILLED_URL_LEN: usize = 32 * 1024;

// Read by [`check_url`]; this type only describes a destination's `https://` address in
// `/openapi.json`, where it stands in place (no schema of its own) and each field says what the
// address is for.
#[derive(schemars::JsonSchema)]
#[schemars(inline, transparent)]
pub struct HttpsUrlJson(
    #[schemars(length(max = MAX_URL_LEN), pattern(r"^(https://[!-~]+)?$"))]
    pub String,
);

/// A destination's `https://` address, as a room declares the field that holds one (a
/// postback's template, a webhook's URL, an ad platform's API).
pub(super) const URL: Field = Field {
    name: "url",
    schema: r#"{"type": ["string", "null"], "maxLength": 2048, "pattern": "^(https://[!-~]+)?$"}"#,
    ..Field::TEXT
};

/// Checks a destination's URL: `https://` (or `http://` when private addresses are allowed),
/// a host, no user name or password, and, when its host is an IP address, a public one unless
/// `allow_private`. A host name is checked after it resolves, before each send.
pub fn check_url(field: &'static str, text: &str, allow_private: bool) -> Result<url::Url, Error> {
    check_url_of(field, text, allow_private, MAX_URL_LEN)
}

/// [`check_url`] of a URL of at most `max_len` bytes.
pub fn check_url_of(
    field: &'static str,
    text: &str,
    allow_private: bool,
    max_len: usize,
) -> Result<url::Url, Error> {
    let bad = |why: &str| {
        Error::field(
            Code::InvalidField,
            field,
            format!("{field} {why}, got {}", quoted(text)),
        )
    };
    if text.len() > max_len || !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad(&format!(
            "must be at most {max_len} visible ASCII characters"
        )));
    }
    if text.contains(crate::domain::credential::REDACTED) {
        return Err(bad(
            "holds [redacted], which a shown URL has in place of its token: give the token itself",
        ));
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
    if let Some(ip) = ip
        && !allow_private
        && is_private(ip)
    {
        return Err(private_address(field, &ip.to_string()));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use ipnet::IpNet;

    use super::*;

    /// Each range of the rule: its first and last address (refused), and its neighbours that
    /// are public (allowed; none where both are special too). `*`: the remaining groups ffff.
    #[rustfmt::skip]
    const RANGES: [(&str, [&str; 2], &[&str]); 34] = [
        ("0.0.0.0/8", ["0.0.0.0", "0.255.255.255"], &["1.0.0.0"]),
        ("10.0.0.0/8", ["10.0.0.0", "10.255.255.255"], &["9.255.255.255", "11.0.0.0"]),
        ("100.64.0.0/10", ["100.64.0.0", "100.127.255.255"], &["100.63.255.255", "100.128.0.0"]),
        ("127.0.0.0/8", ["127.0.0.0", "127.255.255.255"], &["126.255.255.255", "128.0.0.0"]),
        ("169.254.0.0/16", ["169.254.0.0", "169.254.255.255"], &["169.253.255.255", "169.255.0.0"]),
        ("172.16.0.0/12", ["172.16.0.0", "172.31.255.255"], &["172.15.255.255", "172.32.0.0"]),
        ("192.0.0.0/24", ["192.0.0.0", "192.0.0.255"], &["191.255.255.255", "192.0.1.0"]),
        ("192.0.2.0/24", ["192.0.2.0", "192.0.2.255"], &["192.0.1.255", "192.0.3.0"]),
        ("192.31.196.0/24", ["192.31.196.0", "192.31.196.255"], &["192.31.195.255", "192.31.197.0"]),
        ("192.52.193.0/24", ["192.52.193.0", "192.52.193.255"], &["192.52.192.255", "192.52.194.0"]),
        ("192.88.99.0/24", ["192.88.99.0", "192.88.99.255"], &["192.88.98.255", "192.88.100.0"]),
        ("192.168.0.0/16", ["192.168.0.0", "192.168.255.255"], &["192.167.255.255", "192.169.0.0"]),
        ("192.175.48.0/24", ["192.175.48.0", "192.175.48.255"], &["192.175.47.255", "192.175.49.0"]),
        ("198.18.0.0/15", ["198.18.0.0", "198.19.255.255"], &["198.17.255.255", "198.20.0.0"]),
        ("198.51.100.0/24", ["198.51.100.0", "198.51.100.255"], &["198.51.99.255", "198.51.101.0"]),
        ("203.0.113.0/24", ["203.0.113.0", "203.0.113.255"], &["203.0.112.255", "203.0.114.0"]),
        ("224.0.0.0/4", ["224.0.0.0", "239.255.255.255"], &["223.255.255.255"]),
        ("240.0.0.0/4", ["240.0.0.0", "255.255.255.255"], &[]),
        // Judged as their last 32 bits, here 0.0.0.0 and 255.255.255.255.
        ("::ffff:0:0/96", ["::ffff:0.0.0.0", "::ffff:255.255.255.255"], &["::fffe:ffff:ffff", "0:0:0:1::"]),
        ("64:ff9b::/96", ["64:ff9b::", "64:ff9b::ffff:ffff"], &["64:ff9a:ffff:*", "64:ff9b::1:0:0"]),
        ("::/96", ["::", "::ffff:ffff"], &["::1:0:0"]),
        ("64:ff9b:1::/48", ["64:ff9b:1::", "64:ff9b:1:ffff:*"], &["64:ff9b:0:ffff:*", "64:ff9b:2::"]),
        ("100::/64", ["100::", "100::ffff:ffff:ffff:ffff"], &["ff:ffff:*"]),
        ("100:0:0:1::/64", ["100:0:0:1::", "100:0:0:1:ffff:*"], &["100:0:0:2::"]),
        ("2001::/23", ["2001::", "2001:1ff:ffff:*"], &["2000:ffff:*", "2001:200::"]),
        ("2001:db8::/32", ["2001:db8::", "2001:db8:ffff:*"], &["2001:db7:ffff:*", "2001:db9::"]),
        ("2002::/16", ["2002::", "2002:ffff:*"], &["2001:ffff:*", "2003::"]),
        ("2620:4f:8000::/48", ["2620:4f:8000::", "2620:4f:8000:ffff:*"], &["2620:4f:7fff:ffff:*", "2620:4f:8001::"]),
        ("3fff::/20", ["3fff::", "3fff:fff:ffff:*"], &["3ffe:ffff:*", "3fff:1000::"]),
        ("5f00::/16", ["5f00::", "5f00:ffff:*"], &["5eff:ffff:*", "5f01::"]),
        ("fc00::/7", ["fc00::", "fdff:ffff:*"], &["fbff:ffff:*", "fe00::"]),
        ("fe80::/10", ["fe80::", "febf:ffff:*"], &["fe7f:ffff:*"]),
        ("fec0::/10", ["fec0::", "feff:ffff:*"], &[]),
        ("ff00::/8", ["ff00::", "ffff:ffff:*"], &[]),
    ];

    fn address(text: &str) -> IpAddr {
        let groups = text.split(':').count();
        let filled = text.replace('*', &vec!["ffff"; 9 - groups].join(":"));
        filled.parse().unwrap_or_else(|_| panic!("{text}"))
    }

    #[test]
    fn every_special_purpose_range_is_refused_to_its_edges_and_no_further() {
        for (range, inside, outside) in RANGES {
            for a in inside {
                assert!(is_private(address(a)), "{a} in {range}");
            }
            for a in outside {
                assert!(!is_private(address(a)), "{a} outside {range}");
            }
        }
        // Every range of the rule has its row, so a range added is a range tested.
        let tested: Vec<IpNet> = RANGES.iter().map(|(r, ..)| r.parse().unwrap()).collect();
        let v4 = SPECIAL_V4.iter().map(|n| IpNet::V4(*n));
        let v6 = EMBEDS_V4.iter().chain(&SPECIAL_V6).map(|n| IpNet::V6(*n));
        for net in v4.chain(v6) {
            assert!(tested.contains(&net), "{net} has no row");
        }
        assert_eq!(
            tested.len(),
            SPECIAL_V4.len() + EMBEDS_V4.len() + SPECIAL_V6.len()
        );
    }

    #[test]
    fn an_ipv4_address_inside_an_ipv6_one_is_judged_as_itself() {
        for private in [
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "64:ff9b::192.0.2.1",
            "::127.0.0.1",
            "::8.8.8.8",
        ] {
            assert!(is_private(private.parse().unwrap()), "{private}");
        }
        for public in [
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "8.8.8.8",
            "2a03:2880:f12f:83:face:b00c:0:25de",
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
