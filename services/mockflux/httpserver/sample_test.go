package httpserver_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Sample URLs are signed and expire SampleTTL after the task was first reported Ready.
func TestSampleURLs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sub := b.submitOK(t, "flux-dev", "", fox)
	sample := b.pollUntilReady(t, sub.Id, 2).Sample
	u, err := url.Parse(sample)
	if err != nil {
		t.Fatal(err)
	}
	exp := u.Query().Get("exp")
	if want := strconv.FormatInt(b.clock.Now().Add(10*time.Minute).Unix(), 10); exp != want {
		t.Fatalf("exp %s, want %s", exp, want)
	}
	sig := u.Query().Get("sig")
	base := b.url + u.Path
	if want := strings.Replace(b.url, "127.0.0.1", "localhost", 1) + "/samples/"; !strings.HasPrefix(sample, want) {
		t.Fatalf("sample %s is not on the delivery host %s", sample, want)
	}

	forbidden := []struct{ name, url string }{
		{"bad signature", base + "?exp=" + exp + "&sig=" + strings.Repeat("0", len(sig))},
		{"moved expiry", base + "?exp=9999999999&sig=" + sig},
		{"other job", b.url + "/samples/" + sub.Id + "x.png?exp=" + exp + "&sig=" + sig},
		{"no signature", base + "?exp=" + exp},
		{"no expiry", base + "?sig=" + sig},
		{"expiry not a number", base + "?exp=soon&sig=" + sig},
	}
	for _, c := range forbidden {
		if status, _, body := b.get(t, c.url, nil); status != http.StatusForbidden || detail(t, body) == "" {
			t.Errorf("%s: %d %s", c.name, status, body)
		}
	}

	b.clock.Advance(10 * time.Minute) // the last second it is valid
	if status, _, _ := b.get(t, sample, nil); status != http.StatusOK {
		t.Fatalf("at expiry: %d", status)
	}
	b.clock.Advance(time.Second)
	status, _, body := b.get(t, sample, nil)
	if status != http.StatusForbidden || !strings.Contains(detail(t, body), "expired") {
		t.Fatalf("after expiry: %d %s", status, body)
	}
	// Polling again does not renew the URL; the task's result has simply expired.
	if again := b.poll(t, sub.Id); again.Result.Sample != sample {
		t.Fatalf("the sample URL changed: %s", again.Result.Sample)
	}

	// A correctly signed URL for a task that does not exist, or in the wrong format, is 404.
	later := b.clock.Now().Add(time.Hour).Unix()
	for _, file := range []string{"00000000-0000-0000-0000-000000000000.jpeg", sub.Id + ".png"} {
		status, _, body := b.get(t, b.url+"/samples/"+file+"?exp="+strconv.FormatInt(later, 10)+"&sig="+sign(b.signingKey, file, later), nil)
		if status != http.StatusNotFound || detail(t, body) == "" {
			t.Errorf("%s: %d %s", file, status, body)
		}
	}
}

func sign(key []byte, file string, exp int64) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(file + "\n" + strconv.FormatInt(exp, 10)))
	return hex.EncodeToString(m.Sum(nil))
}
