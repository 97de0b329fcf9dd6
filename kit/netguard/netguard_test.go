package netguard

import (
	"errors"
	"net/netip"
	"testing"
)

// Every special-purpose range is refused, in every form the resolver may hand it; public
// addresses pass.
func TestKind(t *testing.T) {
	t.Parallel()
	refused := map[string]string{
		"127.0.0.1": "loopback", "127.8.9.10": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"10.0.0.1": "private", "172.16.0.1": "private", "172.31.255.255": "private", "192.168.1.1": "private", "::ffff:10.1.2.3": "private",
		"100.64.0.1": "shared (CGNAT)", "100.127.255.254": "shared (CGNAT)",
		"169.254.169.254": "link-local", "fe80::1": "link-local", "fe80::1%eth0": "link-local",
		"192.0.0.1": "IETF protocol assignment", "192.0.0.170": "IETF protocol assignment",
		"192.0.2.1": "documentation", "198.51.100.7": "documentation", "203.0.113.9": "documentation", "2001:db8::1": "documentation",
		"198.18.0.1": "benchmarking", "198.19.255.255": "benchmarking",
		"192.88.99.1": "6to4 relay anycast",
		"0.0.0.0":     "unspecified", "0.1.2.3": "unspecified", "::": "unspecified",
		"224.0.0.1": "multicast", "239.1.1.1": "multicast", "ff02::1": "multicast",
		"240.0.0.1": "reserved", "255.255.255.255": "reserved",
		"fc00::1": "unique-local", "fd12:3456::1": "unique-local",
		"64:ff9b::7f00:1": "NAT64 form of a loopback", "64:ff9b::a00:1": "NAT64 form of a private",
		"64:ff9b::6440:1": "NAT64 form of a shared (CGNAT)", "64:ff9b:1::1": "NAT64 local-use",
		"2002:7f00:1::1": "6to4 form of a loopback", "2002:c0a8:101::1": "6to4 form of a private", "2002:c612::1": "6to4 form of a benchmarking",
		"2001::1": "IETF protocol assignment", "100::1": "discard-only", "::127.0.0.1": "IPv4-compatible",
	}
	for addr, want := range refused {
		if got := Kind(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s: %q, want %q", addr, got, want)
		}
	}
	for _, addr := range []string{"1.1.1.1", "8.8.8.8", "172.32.0.1", "192.169.0.1", "100.128.0.1", "198.20.0.1", "11.22.33.44",
		"2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "2a00:1450:4001::1"} {
		if got := Kind(netip.MustParseAddr(addr)); got != "" {
			t.Errorf("%s was refused as %q", addr, got)
		}
	}
}

func TestControl(t *testing.T) {
	t.Parallel()
	var r *RefusedError
	if err := Control("tcp", "169.254.169.254:80", nil); !errors.As(err, &r) || r.Kind != "link-local" {
		t.Fatalf("err = %v", err)
	}
	if err := Control("tcp", "[::ffff:127.0.0.1]:443", nil); !errors.As(err, &r) || r.Addr.String() != "127.0.0.1" {
		t.Fatalf("err = %v", err)
	}
	if err := Control("tcp", "not an address", nil); err == nil {
		t.Fatal("an address it cannot judge was allowed")
	}
	if err := Control("tcp", "1.1.1.1:443", nil); err != nil {
		t.Fatal(err)
	}
}
