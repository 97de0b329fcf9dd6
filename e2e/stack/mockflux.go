package stack

import (
	"net"
	"net/url"
)

// MockfluxOtherHost is the host (host:port) that mockflux, reached at baseURL, answers its
// polling and result URLs on: the same server under its other name (127.0.0.1 and localhost for
// each other), as the real API answers regional and delivery hosts other than the one a submit
// went to. Gongbu is told to poll there (--flux-polling-hosts) and to download from there
// (--flux-sample-hosts, which also lets a download reach this loopback address).
func MockfluxOtherHost(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil {
		return ""
	}
	host, port := u.Hostname(), u.Port()
	switch host {
	case "127.0.0.1":
		host = "localhost"
	case "localhost":
		host = "127.0.0.1"
	}
	if port == "" {
		return host
	}
	return net.JoinHostPort(host, port)
}
