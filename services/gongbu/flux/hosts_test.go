package flux_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/flux"
)

func TestBFLAPIHost(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"api.bfl.ai": true, "api.eu.bfl.ai": true, "api.us.bfl.ai": true, "api.eu1.bfl.ai": true, "api.us4.bfl.ai": true,
		"API.EU2.BFL.AI": true, "api.eu2.bfl.ai.": true, "api.eu2.bfl.ai:443": true,
		"api.eu2.bfl.ai:8443": false, "delivery-eu1.bfl.ai": false, "delivery.eu2.bfl.ai": false, "bfl.ai": false,
		"api.eu2.bfl.ai.evil.example": false, "evil-api.bfl.ai": false, "api.bfl.ml": false, "api.x.y.bfl.ai": false,
		"api.bfl.ai.example.com": false, "": false,
	} {
		if got := flux.BFLAPIHost(host); got != want {
			t.Errorf("BFLAPIHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// bflByName is one HTTPS server that answers for every host name, as BFL's hosts would,
// reached through a transport that sends every name's port 443 to it (and trusts it).
type bflByName struct {
	mu    sync.Mutex
	hosts []string // the Host of each request, with its x-key
	keys  []string
	srv   *httptest.Server
}

func newBFLByName(t *testing.T, h http.HandlerFunc) (*bflByName, *http.Transport) {
	t.Helper()
	b := &bflByName{}
	b.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.hosts, b.keys = append(b.hosts, r.Host), append(b.keys, r.Header.Get("x-key"))
		b.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(b.srv.Close)
	tr := flux.NewTransport()
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // a test server for every name; what is tested is where the key goes
	addr := b.srv.Listener.Addr().String()
	tr.DialContext = func(ctx context.Context, network, to string) (net.Conn, error) {
		if _, port, _ := net.SplitHostPort(to); port != "443" {
			return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError("only port 443 answers here")}
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	return b, tr
}

func (b *bflByName) seen() ([]string, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.hosts...), append([]string(nil), b.keys...)
}

// With BFL's API as the base URL and nothing else configured, the adapter polls the regional
// host a polling URL names, with the key, and no host that is not one of BFL's API hosts.
func TestPollsBFLsRegionalHosts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pollingURL string
		host       string // the host polled; "" for none
	}{
		{"https://api.eu2.bfl.ai/v1/get_result?id=task-1", "api.eu2.bfl.ai"},
		{"https://api.us1.bfl.ai/v1/get_result?id=task-1", "api.us1.bfl.ai"},
		{"https://api.bfl.ai/v1/get_result?id=task-1", "api.bfl.ai"},
		{"https://delivery-eu2.bfl.ai/v1/get_result?id=task-1", ""},
		{"https://api.eu2.bfl.ai.evil.example/v1/get_result?id=task-1", ""},
		{"http://api.eu2.bfl.ai/v1/get_result?id=task-1", ""},
		{"https://api.eu2.bfl.ai:8443/v1/get_result?id=task-1", ""},
		{"https://user:pw@api.eu2.bfl.ai/v1/get_result?id=task-1", ""},
	} {
		t.Run(c.pollingURL, func(t *testing.T) {
			t.Parallel()
			b, tr := newBFLByName(t, reply(http.StatusOK, bflapi.ResultResponse{Id: "task-1", Status: bflapi.ResultStatusPending}))
			a, err := flux.NewAdapterWithTransport(flux.Config{BaseURL: "https://api.bfl.ai", APIKey: apiKey, Timeout: 5 * time.Second}, tr)
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.Poll(context.Background(), gongbu.Job{ID: "task-1", PollingURL: c.pollingURL})
			hosts, keys := b.seen()
			switch {
			case c.host == "" && (err == nil || len(hosts) != 0):
				t.Fatalf("err %v, hosts %v: the key went where it must not", err, hosts)
			case c.host != "" && (err != nil || len(hosts) != 1 || hosts[0] != c.host || keys[0] != apiKey):
				t.Fatalf("err %v, hosts %v: want one poll of %s with the key", err, hosts, c.host)
			}
		})
	}
	// Against another base URL (mockflux's, say), BFL's hosts are no permission.
	b, tr := newBFLByName(t, reply(http.StatusOK, bflapi.ResultResponse{Id: "task-1", Status: bflapi.ResultStatusPending}))
	a, err := flux.NewAdapterWithTransport(flux.Config{BaseURL: "https://flux.internal.example", APIKey: apiKey, Timeout: 5 * time.Second}, tr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Poll(context.Background(), gongbu.Job{ID: "task-1", PollingURL: "https://api.eu2.bfl.ai/v1/get_result?id=task-1"}); err == nil {
		t.Fatal("a BFL host was polled for another API")
	}
	if hosts, _ := b.seen(); len(hosts) != 0 {
		t.Fatalf("polled %v", hosts)
	}
}

// Without an allow-list, a result may be on any HTTPS host (BFL moves its delivery hosts), and
// is downloaded without the key, without a redirect, and only from a public address: a sample
// URL that resolves to this machine is refused before any connection.
func TestSamplesWithoutAnAllowList(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sample string
		ok     bool
	}{
		{"https://delivery.eu2.bfl.ai/results/task-1/sample.jpeg?se=1&sig=x", true},
		{"https://bfldeliveryprod.blob.core.windows.net/results/sample.jpeg", true},
		{"http://delivery.eu2.bfl.ai/results/task-1/sample.jpeg", false},
		{"https://user:pw@delivery.eu2.bfl.ai/sample.jpeg", false},
		{"ftp://delivery.eu2.bfl.ai/sample.jpeg", false},
	} {
		b := newBFL(t)
		b.answer(reply(http.StatusOK, bflapi.ResultResponse{Id: "task-1", Status: bflapi.ResultStatusReady, Result: &bflapi.Result{Sample: c.sample}}))
		a, err := flux.NewAdapter(flux.Config{BaseURL: b.url, APIKey: apiKey, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.Poll(context.Background(), gongbu.Job{ID: "task-1"})
		if c.ok != (err == nil && got.ImageURL == c.sample) {
			t.Errorf("%s: %+v %v, want taken %v", c.sample, got, err, c.ok)
		}
	}

	var hits atomic.Int32
	local := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(local.Close)
	a, err := flux.NewAdapter(flux.Config{BaseURL: "https://api.bfl.ai", APIKey: apiKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	byName := strings.Replace(local.URL, "127.0.0.1", "localhost", 1)
	for _, u := range []string{local.URL + "/sample.png", byName + "/sample.png"} {
		if _, err := a.FetchResult(context.Background(), u); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: %v, want the download refused as loopback", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the local server was reached %d times", n)
	}
}
