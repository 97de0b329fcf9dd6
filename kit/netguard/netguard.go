// Package netguard judges the addresses an outbound request to an untrusted URL may reach:
// only public unicast ones, never an address of the IANA special-purpose registries (loopback,
// private, link-local, shared CGNAT space, benchmarking, documentation, the IETF protocol
// block, multicast, unspecified, reserved), nor an IPv6 form that carries such an IPv4 address
// (mapped, NAT64, 6to4). It judges the address dialed, after resolution, so that no DNS answer
// can steer a request inside: use Control as a net.Dialer's Control.
package netguard

import (
	"fmt"
	"net/netip"
	"syscall"
)

// RefusedError is a connection the guard refused.
type RefusedError struct {
	Addr netip.Addr
	Kind string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused: %s is a %s address, not a public one", e.Addr, e.Kind)
}

// Control is a net.Dialer Control function: it runs on the resolved address of every
// connection attempt, before the connection is made, and refuses any that is not public.
func Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refused: cannot judge the address %q", address)
	}
	if kind := Kind(ap.Addr()); kind != "" {
		return &RefusedError{Addr: ap.Addr().Unmap(), Kind: kind}
	}
	return nil
}

// block is one range of a special-purpose registry.
type block struct {
	prefix netip.Prefix
	kind   string
}

func blocks(kind string, prefixes ...string) []block {
	out := make([]block, len(prefixes))
	for i, p := range prefixes {
		out[i] = block{netip.MustParsePrefix(p), kind}
	}
	return out
}

// ipv4 are the IPv4 ranges refused: the IANA IPv4 Special-Purpose Address Registry, whole
// (some of its entries are marked globally reachable, but no image host lives there), with
// multicast and the deprecated 6to4 relay anycast.
var ipv4 = concat(
	blocks("unspecified", "0.0.0.0/8"),
	blocks("private", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"),
	blocks("shared (CGNAT)", "100.64.0.0/10"),
	blocks("loopback", "127.0.0.0/8"),
	blocks("link-local", "169.254.0.0/16"),
	blocks("IETF protocol assignment", "192.0.0.0/24"),
	blocks("documentation", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"),
	blocks("AS112", "192.31.196.0/24", "192.175.48.0/24"),
	blocks("AMT", "192.52.193.0/24"),
	blocks("6to4 relay anycast", "192.88.99.0/24"),
	blocks("benchmarking", "198.18.0.0/15"),
	blocks("multicast", "224.0.0.0/4"),
	blocks("reserved", "240.0.0.0/4"), // with the limited broadcast address, 255.255.255.255
)

// ipv6 are the IPv6 ranges refused outright: the IANA IPv6 Special-Purpose Address Registry
// but for the forms that carry an IPv4 address, which Kind judges by that address.
var ipv6 = concat(
	blocks("unspecified", "::/128"),
	blocks("loopback", "::1/128"),
	blocks("IPv4-compatible", "::/96"),
	blocks("NAT64 local-use", "64:ff9b:1::/48"),
	blocks("discard-only", "100::/64"),
	blocks("IETF protocol assignment", "2001::/23"), // Teredo, ORCHIDv2, benchmarking, ...
	blocks("documentation", "2001:db8::/32", "3fff::/20"),
	blocks("SRv6 SID", "5f00::/16"),
	blocks("unique-local", "fc00::/7"),
	blocks("link-local", "fe80::/10"),
	blocks("multicast", "ff00::/8"),
)

var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	ipv4All = netip.MustParsePrefix("0.0.0.0/0")
)

func concat(lists ...[]block) []block {
	var out []block
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// Kind names why a is not a public unicast address, or is "" for one that is.
func Kind(a netip.Addr) string {
	a = a.WithZone("")
	switch {
	case !a.IsValid():
		return "invalid"
	case a.Is4In6():
		return kind4(a.Unmap())
	case a.Is4():
		return kind4(a)
	case nat64.Contains(a):
		b := a.As16()
		return inner("NAT64", netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	case sixTo4.Contains(a):
		b := a.As16()
		return inner("6to4", netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	}
	for _, b := range ipv6 {
		if b.prefix.Contains(a) {
			return b.kind
		}
	}
	return ""
}

func kind4(a netip.Addr) string {
	for _, b := range ipv4 {
		if b.prefix.Contains(a) {
			return b.kind
		}
	}
	return ""
}

// inner judges the IPv4 address an IPv6 form carries.
func inner(form string, a netip.Addr) string {
	if !ipv4All.Contains(a) {
		return form
	}
	if k := kind4(a); k != "" {
		return form + " form of a " + k
	}
	return ""
}
