//! Classification of resolved addresses, and the address side of the policy.
//!
//! After a name is resolved (once), every address is classified with [`classify`]. Only public
//! unicast passes by default; a policy may allow more with explicit CIDR ranges
//! (`allow_ranges`, e.g. tests allow `127.0.0.0/8`). Two things are denied whatever the
//! policy says: cloud metadata endpoints (also when embedded in an IPv6 form) and the guard's
//! own listening address (a tunnel to itself would loop and skip the checks).
//!
//! IPv6 forms that embed an IPv4 address (mapped `::ffff:0:0/96`, compatible `::/96`,
//! translated `::ffff:0:0:0/96`, NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`, 6to4 `2002::/16`,
//! Teredo `2001::/32`) are denied as such: they could reach an IPv4 destination that the IPv4
//! table would deny.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

/// What an address is, for the guard's purposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum AddrClass {
    /// Public unicast: allowed.
    Global,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918, unique local `fc00::/7`, site-local `fec0::/10`.
    Private,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// Carrier-grade NAT `100.64.0.0/10`.
    Cgnat,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// Documentation ranges (`192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`,
    /// `2001:db8::/32`, `3fff::/20`).
    Documentation,
    /// Benchmarking `198.18.0.0/15`, `2001:2::/48`.
    Benchmark,
    /// Reserved or special purpose (`240.0.0.0/4`, `192.0.0.0/24`, `192.88.99.0/24`,
    /// `100::/64`, ORCHID, anything outside `2000::/3`).
    Reserved,
    /// Cloud metadata endpoints: always denied.
    Metadata,
    /// `::ffff:a.b.c.d`.
    Ipv4Mapped,
    /// `::a.b.c.d` (deprecated) and `::ffff:0:a.b.c.d` (SIIT).
    Ipv4Compatible,
    /// `64:ff9b::/96`, `64:ff9b:1::/48`.
    Nat64,
    /// `2002::/16`.
    SixToFour,
    /// `2001::/32`.
    Teredo,
}

impl AddrClass {
    /// Stable audit reason for a denial of this class.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            AddrClass::Global => "address_global",
            AddrClass::Unspecified => "address_unspecified",
            AddrClass::Loopback => "address_loopback",
            AddrClass::Private => "address_private",
            AddrClass::LinkLocal => "address_link_local",
            AddrClass::Cgnat => "address_cgnat",
            AddrClass::Multicast => "address_multicast",
            AddrClass::Broadcast => "address_broadcast",
            AddrClass::Documentation => "address_documentation",
            AddrClass::Benchmark => "address_benchmark",
            AddrClass::Reserved => "address_reserved",
            AddrClass::Metadata => "address_metadata",
            AddrClass::Ipv4Mapped => "address_ipv4_mapped",
            AddrClass::Ipv4Compatible => "address_ipv4_compatible",
            AddrClass::Nat64 => "address_nat64",
            AddrClass::SixToFour => "address_6to4",
            AddrClass::Teredo => "address_teredo",
        }
    }
}

const METADATA_V4: [Ipv4Addr; 3] = [
    Ipv4Addr::new(169, 254, 169, 254), // AWS, GCP, Azure, OpenStack...
    Ipv4Addr::new(169, 254, 170, 2),   // AWS ECS task metadata
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba Cloud
];
const METADATA_V6: [Ipv6Addr; 1] = [Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254)];

/// IPv4 table, first match wins.
const V4_TABLE: &[([u8; 4], u8, AddrClass)] = &[
    ([0, 0, 0, 0], 8, AddrClass::Unspecified),
    ([10, 0, 0, 0], 8, AddrClass::Private),
    ([100, 64, 0, 0], 10, AddrClass::Cgnat),
    ([127, 0, 0, 0], 8, AddrClass::Loopback),
    ([169, 254, 0, 0], 16, AddrClass::LinkLocal),
    ([172, 16, 0, 0], 12, AddrClass::Private),
    ([192, 0, 0, 0], 24, AddrClass::Reserved),
    ([192, 0, 2, 0], 24, AddrClass::Documentation),
    ([192, 88, 99, 0], 24, AddrClass::Reserved),
    ([192, 168, 0, 0], 16, AddrClass::Private),
    ([198, 18, 0, 0], 15, AddrClass::Benchmark),
    ([198, 51, 100, 0], 24, AddrClass::Documentation),
    ([203, 0, 113, 0], 24, AddrClass::Documentation),
    ([224, 0, 0, 0], 4, AddrClass::Multicast),
    ([255, 255, 255, 255], 32, AddrClass::Broadcast),
    ([240, 0, 0, 0], 4, AddrClass::Reserved),
];

/// IPv6 table, first match wins (after `::`, `::1` and metadata).
const V6_TABLE: &[([u16; 8], u8, AddrClass)] = &[
    ([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, AddrClass::Ipv4Mapped),
    ([0, 0, 0, 0, 0xffff, 0, 0, 0], 96, AddrClass::Ipv4Compatible),
    ([0, 0, 0, 0, 0, 0, 0, 0], 96, AddrClass::Ipv4Compatible),
    ([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, AddrClass::Nat64),
    ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, AddrClass::Nat64),
    ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, AddrClass::Reserved),
    ([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, AddrClass::Teredo),
    ([0x2001, 0x2, 0, 0, 0, 0, 0, 0], 48, AddrClass::Benchmark),
    (
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        AddrClass::Documentation,
    ),
    ([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28, AddrClass::Reserved),
    ([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, AddrClass::Reserved),
    ([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, AddrClass::SixToFour),
    ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, AddrClass::Documentation),
    ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, AddrClass::Private),
    ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, AddrClass::LinkLocal),
    ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, AddrClass::Private),
    ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, AddrClass::Multicast),
];

fn v4_in(ip: Ipv4Addr, net: [u8; 4], prefix: u8) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn v6_in(ip: Ipv6Addr, net: [u16; 8], prefix: u8) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix))
    };
    (u128::from(ip) & mask) == (u128::from(Ipv6Addr::from(net)) & mask)
}

/// Classify one address. Total: every address has exactly one class.
pub(crate) fn classify(ip: IpAddr) -> AddrClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddrClass {
    if METADATA_V4.contains(&ip) {
        return AddrClass::Metadata;
    }
    V4_TABLE
        .iter()
        .find(|(net, prefix, _)| v4_in(ip, *net, *prefix))
        .map(|(_, _, class)| *class)
        .unwrap_or(AddrClass::Global)
}

fn classify_v6(ip: Ipv6Addr) -> AddrClass {
    if ip.is_unspecified() {
        return AddrClass::Unspecified;
    }
    if ip.is_loopback() {
        return AddrClass::Loopback;
    }
    if METADATA_V6.contains(&ip) || embedded_v4(ip).iter().any(|v4| METADATA_V4.contains(v4)) {
        return AddrClass::Metadata;
    }
    if let Some((_, _, class)) = V6_TABLE
        .iter()
        .find(|(net, prefix, _)| v6_in(ip, *net, *prefix))
    {
        return *class;
    }
    // Global unicast is 2000::/3; everything else is unassigned or special.
    if ip.segments()[0] & 0xe000 == 0x2000 {
        AddrClass::Global
    } else {
        AddrClass::Reserved
    }
}

/// The IPv4 addresses an IPv6 address carries, by the known embedding forms.
pub(crate) fn embedded_v4(ip: Ipv6Addr) -> Vec<Ipv4Addr> {
    let o = ip.octets();
    let last = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    let s = ip.segments();
    let mut out = Vec::new();
    if v6_in(ip, [0, 0, 0, 0, 0, 0xffff, 0, 0], 96)
        || v6_in(ip, [0, 0, 0, 0, 0xffff, 0, 0, 0], 96)
        || v6_in(ip, [0, 0, 0, 0, 0, 0, 0, 0], 96)
        || v6_in(ip, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96)
        || v6_in(ip, [0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48)
    {
        out.push(last);
    }
    if s[0] == 0x2002 {
        out.push(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    if s[0] == 0x2001 && s[1] == 0 {
        // Teredo: server in bits 32..64, client (inverted) in the last 32 bits.
        out.push(Ipv4Addr::new(o[4], o[5], o[6], o[7]));
        out.push(Ipv4Addr::new(!o[12], !o[13], !o[14], !o[15]));
    }
    out
}

/// An address range in CIDR notation; a bare address is a /32 or /128.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Does the range contain `ip`? IPv4 ranges contain IPv4 addresses only, and IPv6 ranges
    /// IPv6 addresses only (`127.0.0.0/8` does not cover `::ffff:127.0.0.1`).
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        match (self.net, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => v4_in(ip, net.octets(), self.prefix),
            (IpAddr::V6(net), IpAddr::V6(ip)) => v6_in(ip, net.segments(), self.prefix),
            _ => false,
        }
    }
}

impl Cidr {
    /// The network address as written (host bits included).
    pub(crate) fn network(&self) -> IpAddr {
        self.net
    }

    /// The prefix length.
    pub(crate) fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The same range with the bits after the prefix cleared (`10.1.2.3/8` -> `10.0.0.0/8`).
    pub(crate) fn masked(&self) -> Cidr {
        let net = match self.net {
            IpAddr::V4(net) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V4((u32::from(net) & mask).into())
            }
            IpAddr::V6(net) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(net) & mask).into())
            }
        };
        Cidr {
            net,
            prefix: self.prefix,
        }
    }

    /// Are bits set after the prefix (`10.1.2.3/8`)? Such a range is the same as its network
    /// (`10.0.0.0/8`), but writing it that way usually means a mistake.
    pub(crate) fn has_host_bits(&self) -> bool {
        self.masked().net != self.net
    }

    /// The non-public class of the one address-table block that holds the whole range, if
    /// one does: `10.0.0.0/8` and `10.1.0.0/16` are `Private`, `127.0.0.1/32` and `::1/128`
    /// `Loopback`; `0.0.0.0/0`, `10.0.0.0/7` or a public range are `None`.
    pub(crate) fn within_class(&self) -> Option<AddrClass> {
        match self.net {
            IpAddr::V4(net) => V4_TABLE
                .iter()
                .find(|(block, prefix, _)| v4_in(net, *block, *prefix))
                .filter(|(_, prefix, _)| self.prefix >= *prefix)
                .map(|(_, _, class)| *class),
            IpAddr::V6(net) => {
                if self.prefix == 128 && (net.is_loopback() || net.is_unspecified()) {
                    return Some(classify_v6(net));
                }
                V6_TABLE
                    .iter()
                    .find(|(block, prefix, _)| v6_in(net, *block, *prefix))
                    .filter(|(_, prefix, _)| self.prefix >= *prefix)
                    .map(|(_, _, class)| *class)
            }
        }
    }
}

impl FromStr for Cidr {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let net: IpAddr = addr.parse().map_err(|_| "not an IP address")?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => {
                if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 3 {
                    return Err("prefix length is not a number");
                }
                p.parse::<u8>()
                    .map_err(|_| "prefix length is not a number")?
            }
        };
        if prefix > max {
            return Err("prefix length too large");
        }
        Ok(Cidr { net, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

/// The guard's own listening address(es): a tunnel there is always refused.
#[derive(Debug, Clone)]
pub(crate) struct SelfAddrs {
    listen: SocketAddr,
    /// When listening on an unspecified address: every local interface address.
    local: Vec<IpAddr>,
}

impl SelfAddrs {
    pub(crate) fn new(listen: SocketAddr) -> Self {
        let mut local = Vec::new();
        if listen.ip().is_unspecified() {
            if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
                for ifa in addrs {
                    let Some(sa) = ifa.address else { continue };
                    if let Some(v4) = sa.as_sockaddr_in() {
                        local.push(IpAddr::V4(v4.ip()));
                    } else if let Some(v6) = sa.as_sockaddr_in6() {
                        local.push(IpAddr::V6(v6.ip()));
                    }
                }
            }
        }
        Self { listen, local }
    }

    pub(crate) fn contains(&self, addr: SocketAddr) -> bool {
        if addr.port() != self.listen.port() {
            return false;
        }
        let ip = addr.ip().to_canonical();
        let listen = self.listen.ip().to_canonical();
        ip == listen
            || ip.is_unspecified()
            || (listen.is_unspecified() && (ip.is_loopback() || self.local.contains(&ip)))
    }
}

/// Why a resolved address was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddrDenied {
    /// The address is in a denied class.
    Class(AddrClass),
    /// The address is the guard's own.
    GuardSelf,
}

impl AddrDenied {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            AddrDenied::Class(class) => class.reason(),
            AddrDenied::GuardSelf => "guard_self",
        }
    }
}

/// Check one resolved address against the classification, the policy's ranges and the guard's
/// own address.
pub(crate) fn check(
    addr: SocketAddr,
    allow_ranges: &[Cidr],
    self_addrs: &SelfAddrs,
) -> Result<(), AddrDenied> {
    let class = classify(addr.ip());
    if class == AddrClass::Metadata {
        return Err(AddrDenied::Class(class));
    }
    if self_addrs.contains(addr) {
        return Err(AddrDenied::GuardSelf);
    }
    if class == AddrClass::Global || allow_ranges.iter().any(|r| r.contains(addr.ip())) {
        return Ok(());
    }
    Err(AddrDenied::Class(class))
}

/// Classes an IP-literal destination is refused in whatever `allow_ip_literals` lists: no
/// TCP service is meant there (unspecified reaches the local host, multicast and broadcast
/// are not unicast), or the address carries an IPv4 address that the IPv4 ranges would judge
/// differently (list that IPv4 address instead).
const LITERAL_NEVER: [AddrClass; 9] = [
    AddrClass::Metadata,
    AddrClass::Unspecified,
    AddrClass::Multicast,
    AddrClass::Broadcast,
    AddrClass::Ipv4Mapped,
    AddrClass::Ipv4Compatible,
    AddrClass::Nat64,
    AddrClass::SixToFour,
    AddrClass::Teredo,
];

/// Is `class` refused for IP-literal destinations whatever the policy lists?
pub(crate) fn literal_never(class: AddrClass) -> bool {
    LITERAL_NEVER.contains(&class)
}

/// Why an IP-literal destination was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LiteralDenied {
    /// No `allow_ip_literals` range holds the address.
    NotListed,
    /// A listed range holds it, but its class or the guard's own address refuses it.
    Addr(AddrDenied),
}

impl LiteralDenied {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            // The reason IP literals have always been refused with.
            LiteralDenied::NotListed => "ip_literal",
            LiteralDenied::Addr(denied) => denied.reason(),
        }
    }
}

/// Check an IP-literal CONNECT destination against `allow_ip_literals`.
///
/// The address must be inside a listed range. Public unicast then passes. A non-public
/// address (loopback, private, link-local, CGNAT, documentation, benchmarking, reserved)
/// passes only when a listed range holding it lies entirely within that class's block, so
/// `10.0.0.0/8` opens `10.1.2.3` but `0.0.0.0/0` opens public addresses only. Metadata,
/// unspecified, multicast, broadcast, IPv4-embedding IPv6 forms and the guard's own address
/// are refused whatever is listed.
pub(crate) fn check_literal(
    addr: SocketAddr,
    allow: &[Cidr],
    self_addrs: &SelfAddrs,
) -> Result<(), LiteralDenied> {
    let ip = addr.ip();
    let class = classify(ip);
    let holding: Vec<&Cidr> = allow.iter().filter(|range| range.contains(ip)).collect();
    if holding.is_empty() {
        return Err(LiteralDenied::NotListed);
    }
    if literal_never(class) {
        return Err(LiteralDenied::Addr(AddrDenied::Class(class)));
    }
    if self_addrs.contains(addr) {
        return Err(LiteralDenied::Addr(AddrDenied::GuardSelf));
    }
    if class == AddrClass::Global
        || holding
            .iter()
            .any(|range| range.within_class() == Some(class))
    {
        return Ok(());
    }
    Err(LiteralDenied::Addr(AddrDenied::Class(class)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> AddrClass {
        classify(s.parse().unwrap())
    }

    #[test]
    fn classification_table() {
        use AddrClass::*;
        let table: &[(&str, AddrClass)] = &[
            ("0.0.0.0", Unspecified),
            ("0.1.2.3", Unspecified),
            ("10.1.2.3", Private),
            ("100.64.0.1", Cgnat),
            ("100.127.255.254", Cgnat),
            ("100.128.0.1", Global),
            ("100.100.100.200", Metadata),
            ("127.0.0.1", Loopback),
            ("127.255.0.9", Loopback),
            ("169.254.1.1", LinkLocal),
            ("169.254.169.254", Metadata),
            ("169.254.170.2", Metadata),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("172.32.0.1", Global),
            ("192.0.0.8", Reserved),
            ("192.0.2.1", Documentation),
            ("192.88.99.1", Reserved),
            ("192.168.1.1", Private),
            ("198.18.0.1", Benchmark),
            ("198.19.255.1", Benchmark),
            ("198.51.100.7", Documentation),
            ("203.0.113.7", Documentation),
            ("224.0.0.1", Multicast),
            ("239.255.255.250", Multicast),
            ("240.0.0.1", Reserved),
            ("255.255.255.255", Broadcast),
            ("8.8.8.8", Global),
            ("1.1.1.1", Global),
            ("::", Unspecified),
            ("::1", Loopback),
            ("fd00:ec2::254", Metadata),
            ("::ffff:127.0.0.1", Ipv4Mapped),
            ("::ffff:8.8.8.8", Ipv4Mapped),
            ("::ffff:169.254.169.254", Metadata),
            ("::ffff:0:8.8.8.8", Ipv4Compatible),
            ("::8.8.8.8", Ipv4Compatible),
            ("64:ff9b::8.8.8.8", Nat64),
            ("64:ff9b::169.254.169.254", Metadata),
            ("64:ff9b:1::1", Nat64),
            ("100::1", Reserved),
            ("2001::1", Teredo),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Teredo),
            ("2001:2::1", Benchmark),
            ("2001:db8::1", Documentation),
            ("2001:20::1", Reserved),
            ("2002:c0a8:0101::1", SixToFour),
            ("2002:a9fe:a9fe::1", Metadata),
            ("3fff::1", Documentation),
            ("fc00::1", Private),
            ("fd12:3456::1", Private),
            ("fe80::1", LinkLocal),
            ("fec0::1", Private),
            ("ff02::1", Multicast),
            ("2606:4700::1111", Global),
            ("2a00:1450:4001::1", Global),
            ("4000::1", Reserved),
        ];
        for (ip, class) in table {
            assert_eq!(c(ip), *class, "{ip}");
        }
    }

    #[test]
    fn cidr_parse_and_contains() {
        let r: Cidr = "127.0.0.0/8".parse().unwrap();
        assert!(r.contains("127.9.9.9".parse().unwrap()));
        assert!(!r.contains("128.0.0.1".parse().unwrap()));
        assert!(!r.contains("::ffff:127.0.0.1".parse().unwrap()));
        let one: Cidr = "::1".parse().unwrap();
        assert!(one.contains("::1".parse().unwrap()));
        assert!("0.0.0.0/0"
            .parse::<Cidr>()
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        for bad in [
            "",
            "x/8",
            "10.0.0.0/",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/+8",
            "1.2.3.4/8/1",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn policy_check() {
        let me = SelfAddrs::new("127.0.0.1:8080".parse().unwrap());
        let loopback: Vec<Cidr> = vec!["127.0.0.0/8".parse().unwrap()];
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(check(a("8.8.8.8:443"), &[], &me), Ok(()));
        assert_eq!(
            check(a("127.0.0.1:443"), &[], &me),
            Err(AddrDenied::Class(AddrClass::Loopback))
        );
        assert_eq!(check(a("127.0.0.1:443"), &loopback, &me), Ok(()));
        assert_eq!(
            check(a("127.0.0.1:8080"), &loopback, &me),
            Err(AddrDenied::GuardSelf)
        );
        assert_eq!(
            check(a("[::ffff:127.0.0.1]:8080"), &loopback, &me),
            Err(AddrDenied::GuardSelf)
        );
        let all: Vec<Cidr> = vec!["0.0.0.0/0".parse().unwrap(), "::/0".parse().unwrap()];
        assert_eq!(
            check(a("169.254.169.254:80"), &all, &me),
            Err(AddrDenied::Class(AddrClass::Metadata))
        );
        assert_eq!(
            check(a("[fd00:ec2::254]:80"), &all, &me),
            Err(AddrDenied::Class(AddrClass::Metadata))
        );
        let any = SelfAddrs::new("0.0.0.0:8080".parse().unwrap());
        assert!(any.contains(a("127.0.0.1:8080")));
        assert!(any.contains(a("0.0.0.0:8080")));
        assert!(!any.contains(a("127.0.0.1:8081")));
    }

    fn ranges(list: &[&str]) -> Vec<Cidr> {
        list.iter().map(|r| r.parse().unwrap()).collect()
    }

    #[test]
    fn a_range_is_within_a_class_only_when_one_block_holds_all_of_it() {
        use AddrClass::*;
        for (range, class) in [
            ("10.0.0.0/8", Some(Private)),
            ("10.1.2.0/24", Some(Private)),
            ("10.1.2.3/32", Some(Private)),
            ("192.168.0.0/16", Some(Private)),
            ("172.16.0.0/12", Some(Private)),
            ("127.0.0.1/32", Some(Loopback)),
            ("100.64.0.0/10", Some(Cgnat)),
            ("169.254.0.0/16", Some(LinkLocal)),
            ("224.0.0.0/4", Some(Multicast)),
            ("2001:db8::/32", Some(Documentation)),
            ("2001:db8:1::/48", Some(Documentation)),
            ("fd00::/8", Some(Private)),
            ("::1/128", Some(Loopback)),
            ("::/128", Some(Unspecified)),
            ("::ffff:10.0.0.0/104", Some(Ipv4Mapped)),
            ("10.0.0.0/7", None),
            ("172.0.0.0/8", None),
            ("0.0.0.0/0", None),
            ("::/0", None),
            ("8.8.8.0/24", None),
            ("2606:4700::/32", None),
            ("2001:db8::/31", None),
        ] {
            let cidr: Cidr = range.parse().unwrap();
            assert_eq!(cidr.within_class(), class, "{range}");
        }
    }

    #[test]
    fn host_bits_after_the_prefix_are_found() {
        for (range, set) in [
            ("10.0.0.0/8", false),
            ("10.1.2.3/8", true),
            ("10.1.2.3/32", false),
            ("10.1.2.3", false),
            ("0.0.0.0/0", false),
            ("2001:db8::/32", false),
            ("2001:db8::1/32", true),
            ("::1/128", false),
            ("::1/0", true),
        ] {
            assert_eq!(
                range.parse::<Cidr>().unwrap().has_host_bits(),
                set,
                "{range}"
            );
        }
    }

    #[test]
    fn ip_literals_pass_only_inside_a_listed_range_of_their_class() {
        let me = SelfAddrs::new("127.0.0.1:8080".parse().unwrap());
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let denied = |class| Err(LiteralDenied::Addr(AddrDenied::Class(class)));
        let listed = ranges(&["10.0.0.0/8", "2001:db8::/32", "8.8.8.0/24", "127.0.0.0/8"]);
        assert_eq!(check_literal(a("10.1.2.3:443"), &listed, &me), Ok(()));
        assert_eq!(check_literal(a("[2001:db8::1]:443"), &listed, &me), Ok(()));
        assert_eq!(check_literal(a("8.8.8.8:443"), &listed, &me), Ok(()));
        assert_eq!(check_literal(a("127.0.0.1:443"), &listed, &me), Ok(()));
        assert_eq!(
            check_literal(a("11.1.2.3:443"), &listed, &me),
            Err(LiteralDenied::NotListed)
        );
        assert_eq!(
            check_literal(a("192.168.1.1:443"), &listed, &me),
            Err(LiteralDenied::NotListed)
        );
        assert_eq!(
            check_literal(a("127.0.0.1:8080"), &listed, &me),
            Err(LiteralDenied::Addr(AddrDenied::GuardSelf))
        );
        // A broad range opens public addresses only.
        let everything = ranges(&["0.0.0.0/0", "::/0"]);
        assert_eq!(check_literal(a("1.1.1.1:443"), &everything, &me), Ok(()));
        assert_eq!(
            check_literal(a("[2606:4700::1111]:443"), &everything, &me),
            Ok(())
        );
        for (addr, class) in [
            ("10.1.2.3:443", AddrClass::Private),
            ("127.0.0.1:443", AddrClass::Loopback),
            ("[::1]:443", AddrClass::Loopback),
            ("100.64.0.1:443", AddrClass::Cgnat),
            ("169.254.1.1:443", AddrClass::LinkLocal),
            ("[fd12::1]:443", AddrClass::Private),
            ("[2001:db8::1]:443", AddrClass::Documentation),
        ] {
            assert_eq!(
                check_literal(a(addr), &everything, &me),
                denied(class),
                "{addr}"
            );
        }
        // Whatever is listed: metadata, unspecified, multicast, broadcast, IPv4 in IPv6.
        let listed = ranges(&[
            "169.254.0.0/16",
            "0.0.0.0/8",
            "224.0.0.0/4",
            "255.255.255.255/32",
            "::ffff:0:0/96",
            "64:ff9b::/96",
            "2002::/16",
            "2001::/32",
            "::/128",
            "fd00::/8",
        ]);
        for (addr, class) in [
            ("169.254.169.254:443", AddrClass::Metadata),
            ("0.0.0.0:443", AddrClass::Unspecified),
            ("224.0.0.1:443", AddrClass::Multicast),
            ("255.255.255.255:443", AddrClass::Broadcast),
            ("[::ffff:10.1.2.3]:443", AddrClass::Ipv4Mapped),
            ("[64:ff9b::a01:203]:443", AddrClass::Nat64),
            ("[2002:a01:203::1]:443", AddrClass::SixToFour),
            ("[2001:0:a01:203::1]:443", AddrClass::Teredo),
            ("[::]:443", AddrClass::Unspecified),
            ("[fd00:ec2::254]:443", AddrClass::Metadata),
        ] {
            assert_eq!(
                check_literal(a(addr), &listed, &me),
                denied(class),
                "{addr}"
            );
        }
        assert_eq!(check_literal(a("169.254.1.1:443"), &listed, &me), Ok(()));
        assert_eq!(
            check_literal(a("10.1.2.3:443"), &[], &me),
            Err(LiteralDenied::NotListed)
        );
    }
}
