//! Where a delivery may go. A webhook URL comes from a catalogue, but its host's addresses
//! come from DNS at delivery time, so a name that resolved to a public address yesterday may
//! resolve to the metadata service or a database on the service's own network today. Unless
//! the catalogue allows an endpoint a private network, every address is checked when the
//! connection is made: the client's resolver drops loopback, private, link-local, shared
//! and other non-public addresses, also those that carry one or are translated on the
//! operator's own network (an address literal in the URL is checked before the
//! request), so nothing reaches them even by a rebinding trick.
//!
//! Must not touch: what is sent, or when.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether `ip` is an address a delivery may not reach unless the catalogue allows private
/// networks: anything but a public unicast address.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private_v4(v4);
            }
            let segments = v6.segments();
            // NAT64's well-known prefix (64:ff9b::/96) carries an IPv4 address in its last
            // 32 bits, and 6to4 (2002::/16) one in the 32 bits after its prefix: each is
            // as private as the address it carries.
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return is_private_v4(embedded_v4(segments[6], segments[7]));
            }
            if segments[0] == 0x2002 {
                return is_private_v4(embedded_v4(segments[1], segments[2]));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // Unique local (fc00::/7), link-local (fe80::/10) and site-local
                // (fec0::/10, deprecated but still routed by some networks).
                || (segments[0] & 0xfe00) == 0xfc00
                || (segments[0] & 0xffc0) == 0xfe80
                || (segments[0] & 0xffc0) == 0xfec0
                // NAT64's local-use prefix (64:ff9b:1::/48): translated by the operator's
                // own network, to wherever it chose.
                || segments[..3] == [0x64, 0xff9b, 1]
                // SIIT's IPv4-translated addresses (::ffff:0:0:0/96): only a translator on
                // the local network routes them.
                || segments[..6] == [0, 0, 0, 0, 0xffff, 0]
                // IPv4-compatible (::/96, deprecated) and documentation (2001:db8::/32).
                || segments[..6] == [0; 6]
                || segments[..2] == [0x2001, 0xdb8]
        }
    }
}

/// The IPv4 address an IPv6 address carries in two of its 16-bit segments.
fn embedded_v4(high: u16, low: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(high) << 16) | u32::from(low))
}

fn is_private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        // "This network" (0.0.0.0/8), shared address space (100.64.0.0/10), IETF protocol
        // assignments (192.0.0.0/24), benchmarking (198.18.0.0/15), reserved (240.0.0.0/4).
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && ip.octets()[2] == 0)
        || (a == 198 && (18..20).contains(&b))
        || a >= 240
}

/// The resolver of an endpoint's client: the system's, with non-public addresses dropped
/// unless `allow_private`.
#[derive(Debug, Clone, Copy)]
pub struct CheckedResolver {
    /// Whether private addresses are kept.
    pub allow_private: bool,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0))
                .await?
                .filter(|addr| allow_private || !is_private(addr.ip()))
                .collect();
            if found.is_empty() {
                return Err(format!(
                    "{} has no address a webhook may reach (private and loopback networks \
                     need allow_private_network in the catalogue)",
                    name.as_str()
                )
                .into());
            }
            let addrs: Addrs = Box::new(found.into_iter());
            Ok(addrs)
        })
    }
}

/// The resolver for an endpoint, as reqwest takes it.
pub fn resolver(allow_private: bool) -> Arc<CheckedResolver> {
    Arc::new(CheckedResolver { allow_private })
}

/// Whether a URL's host is an address literal the endpoint may not reach.
pub fn refused_literal(url: &url::Url, allow_private: bool) -> bool {
    let ip = match url.host() {
        Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
        _ => return false,
    };
    !allow_private && is_private(ip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    #[test]
    fn private_and_special_addresses_are_refused() {
        for text in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            "::127.0.0.1",
            "64:ff9b:1::808:808",
            "64:ff9b:1:ffff::1",
            "::ffff:0:808:808",
            "::ffff:0:7f00:1",
            "2002:a00:1::1",
            "2002:c0a8:101::",
            "2002:7f00:1::1",
            "fec0::1",
            "feff::1",
        ] {
            assert!(is_private(text.parse().unwrap()), "{text} taken for public");
        }
        for text in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "64:ff9b:2::1",
        ] {
            assert!(
                !is_private(text.parse().unwrap()),
                "{text} taken for private"
            );
        }
    }

    proptest::proptest! {
        /// An IPv6 address that carries an IPv4 address where it is routed to it (IPv4-mapped,
        /// NAT64's well-known prefix, 6to4) is as private as that address, whatever the
        /// rest of it holds.
        #[test]
        fn an_address_carrying_an_ipv4_address_is_as_private_as_it(
            v4 in proptest::prelude::any::<u32>(),
            rest in proptest::prelude::any::<[u16; 5]>(),
        ) {
            let v4 = Ipv4Addr::from(v4);
            let [high, low] = [(u32::from(v4) >> 16) as u16, u32::from(v4) as u16];
            let private = is_private_v4(v4);
            let carriers = [
                v4.to_ipv6_mapped(),
                Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, high, low),
                Ipv6Addr::new(0x2002, high, low, rest[0], rest[1], rest[2], rest[3], rest[4]),
            ];
            for carrier in carriers {
                proptest::prop_assert_eq!(is_private(IpAddr::V6(carrier)), private, "{}", carrier);
            }
        }

        /// Every address of the ranges that are never a public destination is refused,
        /// whatever it carries.
        #[test]
        fn local_ranges_are_refused_whole(
            bits in proptest::prelude::any::<u128>(),
        ) {
            // Each range as its prefix and length.
            let ranges: [(u128, u32); 6] = [
                (0x0064_ff9b_0001 << 80, 48),
                (0xffff_0000 << 32, 96),
                (0xfec0 << 112, 10),
                (0xfe80 << 112, 10),
                (0xfc00 << 112, 7),
                (0x2001_0db8 << 96, 32),
            ];
            for (prefix, length) in ranges {
                let host = bits & (u128::MAX >> length);
                let address = Ipv6Addr::from(prefix | host);
                proptest::prop_assert!(is_private(IpAddr::V6(address)), "{} taken for public", address);
            }
        }
    }

    #[test]
    fn address_literals_are_checked_and_names_left_to_the_resolver() {
        let url = |text: &str| url::Url::parse(text).unwrap();
        assert!(refused_literal(&url("http://127.0.0.1:9/hook"), false));
        assert!(refused_literal(&url("http://[::1]:9/hook"), false));
        assert!(!refused_literal(&url("http://127.0.0.1:9/hook"), true));
        assert!(!refused_literal(&url("https://hooks.example.com/"), false));
    }

    #[tokio::test]
    async fn the_resolver_drops_loopback_unless_allowed() {
        let name: Name = "localhost".parse().unwrap();
        let refused = resolver(false).resolve("localhost".parse().unwrap()).await;
        assert!(refused.is_err());
        let allowed: Vec<SocketAddr> = resolver(true).resolve(name).await.unwrap().collect();
        assert!(allowed.iter().all(|addr| addr.ip().is_loopback()));
        assert!(!allowed.is_empty());
    }
}
