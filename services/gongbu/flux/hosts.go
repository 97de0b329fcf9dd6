package flux

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// bflAPIHostRE is BFL's API hosts: api.bfl.ai and the regional ones (api.eu.bfl.ai,
// api.us.bfl.ai, api.eu1.bfl.ai, …, api.us4.bfl.ai and those yet to come).
var bflAPIHostRE = regexp.MustCompile(`^api(\.[a-z]{2,8}[0-9]{0,3})?\.bfl\.ai$`)

// BFLAPIHost reports whether host (a URL's host, with an optional port) is one of BFL's API
// hosts on the HTTPS port: where the API key may go. BFL's delivery hosts never are.
func BFLAPIHost(host string) bool {
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = host, "443"
	}
	return port == "443" && bflAPIHostRE.MatchString(strings.ToLower(strings.TrimSuffix(name, ".")))
}

// pollingServer returns the server (scheme, host and any path before /v1/get_result) and the
// task id of a polling URL the key may be sent to: the base URL's scheme or https, and a
// polling host, or (with BFL's API as the base URL) an HTTPS URL on one of BFL's API hosts.
func (a *Adapter) pollingServer(pollingURL string) (server, id string, err error) {
	u, err := a.checkURL("polling", pollingURL, a.polling)
	if err != nil && a.bflAPI {
		if bu, perr := url.Parse(pollingURL); perr == nil && bu.Scheme == "https" && bu.User == nil && BFLAPIHost(bu.Host) {
			u, err = bu, nil
		}
	}
	if err != nil {
		return "", "", err
	}
	prefix, found := strings.CutSuffix(u.Path, "/v1/get_result")
	id = u.Query().Get("id")
	if !found || id == "" {
		return "", "", fmt.Errorf("the polling URL on host %q is not of the form /v1/get_result?id=ID", u.Host)
	}
	return u.Scheme + "://" + u.Host + prefix, id, nil
}

// sampleURL parses a result's sample URL and checks Gongbu may download it: on an
// allow-listed host where the operator gave some (checkURL), else an HTTPS URL without
// credentials on any host (the download connects to public addresses only).
func (a *Adapter) sampleURL(raw string) (*url.URL, error) {
	if a.samples != nil {
		return a.checkURL("sample", raw, a.samples)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return nil, errors.New("the sample URL is not an https URL without credentials")
	}
	return u, nil
}

// checkURL parses a URL the provider returned and checks it is the base URL's scheme or https,
// carries no credentials, and is on one of hosts.
func (a *Adapter) checkURL(what, raw string, hosts []host) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || (u.Scheme != "https" && u.Scheme != a.base.Scheme) {
		return nil, fmt.Errorf("the %s URL is not an https URL (or one of the API's scheme) without credentials", what)
	}
	for _, h := range hosts {
		if h.matches(u) {
			return u, nil
		}
	}
	return nil, fmt.Errorf("the %s URL's host %q is neither the API's nor one allowed for %s URLs", what, u.Host, what)
}

// host is an allowed host; an empty port is the URL scheme's default.
type host struct{ name, port string }

func (h host) matches(u *url.URL) bool {
	port := defaultPort(u.Scheme)
	return hostName(u) == h.name && cmp.Or(u.Port(), port) == cmp.Or(h.port, port)
}

func hostName(u *url.URL) string { return strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")) }

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// ParseHosts reads a comma-separated list of hosts, each a host name or IP address with an
// optional port (api.us1.bfl.ai, 127.0.0.1:8080, [::1]:9000), matched exactly: no schemes,
// paths or wildcards. It returns them in their canonical form; empty entries are skipped.
func ParseHosts(list string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		h, err := parseHost(s)
		if err != nil {
			return nil, err
		}
		out = append(out, h.String())
	}
	return out, nil
}

func (h host) String() string {
	if h.port == "" {
		if strings.Contains(h.name, ":") {
			return "[" + h.name + "]"
		}
		return h.name
	}
	return net.JoinHostPort(h.name, h.port)
}

func parseHost(s string) (host, error) {
	bad := fmt.Errorf("%q is not a host name or address with an optional port (such as api.us1.bfl.ai or 127.0.0.1:8080)", s)
	u, err := url.Parse("//" + strings.TrimSpace(s))
	if err != nil || u.Host != strings.TrimSpace(s) || strings.HasSuffix(u.Host, ":") || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return host{}, bad
	}
	h := host{name: hostName(u), port: u.Port()}
	if h.port != "" {
		if n, err := strconv.Atoi(h.port); err != nil || n < 1 || n > 65535 {
			return host{}, bad
		}
	}
	if net.ParseIP(h.name) != nil {
		return h, nil
	}
	for _, label := range strings.Split(h.name, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") ||
			strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return host{}, bad
		}
	}
	return h, nil
}
