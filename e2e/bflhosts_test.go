package e2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	harness "hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/proto/bflapi"
)

// bflNames are the host names BFL's answers use that mockflux stands in for: the API Gongbu
// is configured with by default, a regional polling host, and a delivery host.
var bflNames = []string{"api.bfl.ai", "api.eu2.bfl.ai", "delivery-eu2.bfl.ai"}

// The stack with production settings (Gongbu given a BFL key and nothing else) spends against
// mockflux in its BFL form under BFL's own host names: mockflux serves HTTPS at a public
// address in a network namespace of its own, with a certificate for BFL's names from a test CA;
// Gongbu runs with an /etc/hosts of its own that sends those names there, and trusts the test
// CA (SSL_CERT_FILE). A FLUX.2 and a FLUX.1 spend succeed, polled on the regional host and
// downloaded from the delivery host, each charged once at BFL's price, with no idempotency key
// to lean on; `gongbu reconcile` in its production form finds every record in agreement.
func TestSuiteUnderBFLsHostNames(t *testing.T) {
	t.Parallel()
	// It needs root and iproute2 (a network namespace, and a mount namespace for Gongbu). CI has
	// both, so there it must run; a developer's unprivileged make test leaves it to CI.
	skip := t.Skipf
	if os.Getenv("CI") != "" {
		skip = t.Fatalf
	}
	for _, tool := range []string{"ip", "unshare", "mount", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			skip("needs %s: %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		skip("needs root: it makes a network namespace and gives Gongbu a mount namespace of its own")
	}
	dir := t.TempDir()
	ip := bflNamespace(t)
	ca, caFile, certFile, keyFile := testCA(t, dir, bflNames)
	hosts := filepath.Join(dir, "hosts")
	noError(t, os.WriteFile(hosts, []byte("127.0.0.1 localhost\n::1 localhost\n"+ip+" "+strings.Join(bflNames, " ")+"\n"), 0o644))
	wrap := []string{must(exec.LookPath("unshare"))(t), "--mount", "--", "/bin/sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, hosts}

	key := "bfl-test-key-" + fmt.Sprint(mathrand.Int64())
	flux := exec.Command("ip", "netns", "exec", bflNS(t), bin.Path("mockflux"), "serve", "--listen", ip+":443",
		"--tls-cert", certFile, "--tls-key", keyFile, "--api-key", key, "--data", filepath.Join(dir, "mockflux.jsonl"),
		"--polling-url", "https://api.eu2.bfl.ai", "--delivery-url", "https://delivery-eu2.bfl.ai")
	fluxLog := must(os.Create(filepath.Join(dir, "mockflux.log")))(t)
	flux.Stdout, flux.Stderr = fluxLog, fluxLog
	noError(t, flux.Start())
	t.Cleanup(func() { _ = flux.Process.Kill(); _ = flux.Wait(); fluxLog.Close() })
	// The test reaches mockflux as Gongbu does: by BFL's name, at the namespace's address.
	bfl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(ip, "443"))
		},
	}}
	noError(t, poll(20*time.Second, 50*time.Millisecond, func() error {
		resp, err := bfl.Get("https://api.bfl.ai/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	}))

	server, id, _, idConfig := stackPlace(t)
	noError(t, os.WriteFile(filepath.Join(dir, "identity.json"), must(os.ReadFile(idConfig))(t), 0o600))
	su := startSuite(t, harness.Config{
		Dir: dir, ServerURL: server, HubuDB: "hubu_e2e_" + id, GongbuDB: "gongbu_e2e_" + id, BFLAPIKey: key,
		Env:  map[string][]string{"gongbu": {"SSL_CERT_FILE=" + caFile}},
		Wrap: map[string][]string{"gongbu": wrap},
	})
	su.extraSecrets = append(su.extraSecrets, key)
	cs := su.routerFor(su.s.Credentials.AgentToken, 30*time.Second, nil)
	flux2 := su.mustSucceed(cs, `{"prompt":"an origami fox","model":"flux-2-pro","width":1024,"height":1024}`, codexMeta("call_bflhostsFlux2Tq7Wn2pVd4K"), "FLUX.2")
	flux1 := su.mustSucceed(cs, `{"prompt":"an origami fox","model":"flux-dev","width":1024,"height":768}`, codexMeta("call_bflhostsFlux1Lw8Xn2pVd6K"), "FLUX.1")
	if again := su.mustSucceed(cs, `{"prompt":"an origami fox","model":"flux-2-pro","width":1024,"height":1024}`, codexMeta("call_bflhostsFlux2Tq7Wn2pVd4K"), "FLUX.2 again"); again["replayed"] != true {
		t.Fatalf("redelivery: %v", again)
	}
	for _, r := range []result{flux2, flux1} {
		img, _ := r["result"].(map[string]any)
		if link, _ := img["image_url"].(string); !strings.HasPrefix(link, "https://delivery-eu2.bfl.ai/") || img["embedded"] != "original" {
			t.Fatalf("the result: %v", r)
		}
	}

	// Each charged once, at BFL's price: FLUX.2 [pro] 1 MP is 3 credits, FLUX.1 [dev] 2.5.
	resp, err := bfl.Get("https://api.bfl.ai/_mock/charges")
	noError(t, err)
	var charges bflapi.Charges
	noError(t, json.NewDecoder(resp.Body).Decode(&charges))
	resp.Body.Close()
	if charges.Count != 2 || charges.TotalMicros != 55_000 || flux2["charged_micros"] != 30_000.0 || flux1["charged_micros"] != 25_000.0 {
		t.Fatalf("charges %+v; charged %v and %v", charges, flux2["charged_micros"], flux1["charged_micros"])
	}
	es := must(su.records().Executions(context.Background()))(t)
	for _, e := range es {
		if !strings.HasPrefix(e.PollingURL, "https://api.eu2.bfl.ai/v1/get_result?id=") {
			t.Fatalf("execution %s polled at %q, not BFL's regional host", e.DecisionID, e.PollingURL)
		}
	}

	// The money check, as an operator runs it in production: BFL's host names and the key only.
	c := su.s.Credentials
	reconcile := exec.Command(wrap[0], append(wrap[1:], bin.Path("gongbu"), "reconcile", "--require-final")...)
	reconcile.Env = []string{"PATH=" + os.Getenv("PATH"), "SSL_CERT_FILE=" + caFile, "GONGBU_HUBU_URL=" + su.s.Hubu.URL(),
		"GONGBU_HUBU_TOKEN=" + c.GongbuAtHubuToken, "GONGBU_URL=" + su.s.Gongbu.URL(), "GONGBU_SERVICE_TOKEN=" + c.HubuAtGongbuToken,
		"GONGBU_FLUX_KEY=" + key}
	out, err := reconcile.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "provider jobs looked up 2;") || !strings.Contains(string(out), "in agreement") ||
		!strings.Contains(string(out), "Hubu captured 55000 micros") {
		t.Fatalf("gongbu reconcile: %v\n%s", err, out)
	}
	if strings.Contains(string(out), key) {
		t.Fatal("reconcile printed the key")
	}
}

// bflNamespace makes a network namespace, joined to this one by a veth pair, and returns the
// public-looking address (in 11.0.0.0/8, no special-purpose range, so Gongbu's download guard
// lets it through) the namespace's end has. It is removed when the test ends.
func bflNamespace(t *testing.T) string {
	t.Helper()
	ns := bflNS(t)
	octet := 1 + mathrand.IntN(250)
	hostIf, nsIf := fmt.Sprintf("hbfl%dh", octet), fmt.Sprintf("hbfl%dn", octet)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostIf).Run() })
	run("link", "set", nsIf, "netns", ns)
	run("addr", "add", fmt.Sprintf("11.22.%d.1/24", octet), "dev", hostIf)
	run("link", "set", hostIf, "up")
	run("netns", "exec", ns, "ip", "addr", "add", fmt.Sprintf("11.22.%d.44/24", octet), "dev", nsIf)
	run("netns", "exec", ns, "ip", "link", "set", nsIf, "up")
	run("netns", "exec", ns, "ip", "link", "set", "lo", "up")
	return fmt.Sprintf("11.22.%d.44", octet)
}

// bflNS is the test's network namespace name.
func bflNS(t *testing.T) string { return fmt.Sprintf("hubu-bfl-%d", os.Getpid()) }

// testCA makes a certificate authority and a server certificate it signed for names, writes
// the CA's certificate and the server's certificate and key as PEM files in dir, and returns
// the CA as a pool too.
func testCA(t *testing.T, dir string, names []string) (pool *x509.CertPool, caFile, certFile, keyFile string) {
	t.Helper()
	caKey := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))(t)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Hubu test CA"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER := must(x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey))(t)
	caCert := must(x509.ParseCertificate(caDER))(t)
	leafKey := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))(t)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER := must(x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey))(t)
	write := func(name, kind string, der []byte) string {
		path := filepath.Join(dir, name)
		noError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
		return path
	}
	caFile = write("ca.pem", "CERTIFICATE", caDER)
	certFile = write("bfl.pem", "CERTIFICATE", leafDER)
	keyFile = write("bfl-key.pem", "EC PRIVATE KEY", must(x509.MarshalECPrivateKey(leafKey))(t))
	pool = x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, caFile, certFile, keyFile
}
