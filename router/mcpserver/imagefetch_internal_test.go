package mcpserver

import (
	"errors"
	"testing"
)

// The guard judges the address dialed, in every form the resolver may hand it.
func TestRefusePrivate(t *testing.T) {
	t.Parallel()
	refused := []string{
		"127.0.0.1:80", "127.8.9.10:443", "[::1]:443", "[::ffff:127.0.0.1]:80", // loopback
		"10.0.0.1:80", "172.16.0.1:80", "172.31.255.255:80", "192.168.1.1:80", "[::ffff:10.1.2.3]:80", // RFC 1918
		"[fc00::1]:80", "[fd12:3456::1]:80", // unique local
		"169.254.169.254:80", "[fe80::1]:80", "[fe80::1%eth0]:80", // link-local
		"0.0.0.0:80", "0.1.2.3:80", "[::]:80", // unspecified
		"224.0.0.1:80", "239.1.1.1:80", "[ff02::1]:80", // multicast
		"not an address",
	}
	for _, addr := range refused {
		if err := refusePrivate("tcp", addr, nil); err == nil {
			t.Errorf("%s was allowed", addr)
		}
	}
	for _, addr := range []string{"1.1.1.1:443", "8.8.8.8:80", "172.32.0.1:443", "192.169.0.1:80", "[2606:4700::1111]:443", "[::ffff:8.8.8.8]:80"} {
		if err := refusePrivate("tcp", addr, nil); err != nil {
			t.Errorf("%s was refused: %v", addr, err)
		}
	}
	var r *refusedAddrError
	if err := refusePrivate("tcp", "169.254.169.254:80", nil); !errors.As(err, &r) || r.kind != "link-local" {
		t.Fatalf("err = %v", err)
	}
}
