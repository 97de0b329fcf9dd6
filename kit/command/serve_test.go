package command

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// On cancellation a request in flight finishes, then drain runs, and Serve returns.
func TestServeShutsDownGracefully(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "done")
	}))
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	drained := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, srv, ln, slog.New(slog.NewTextHandler(&logs, nil)), 10*time.Second, func(context.Context) error {
			close(drained)
			return nil
		})
	}()
	answered := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			answered <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- string(body)
	}()
	<-started
	cancel()
	select {
	case <-drained:
		t.Fatal("drain ran before the request in flight finished")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if got := <-answered; got != "done" {
		t.Fatalf("the request in flight got %q", got)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	<-drained
	if !strings.Contains(logs.String(), "shutting down") {
		t.Fatalf("no shutdown line: %s", logs.String())
	}
}

// The drain is bounded, and what it reports is returned.
func TestServeBoundsTheDrain(t *testing.T) {
	t.Parallel()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = Serve(ctx, NewHTTPServer(http.NotFoundHandler()), ln, slog.New(slog.DiscardHandler), 50*time.Millisecond, func(ctx context.Context) error {
		<-ctx.Done()
		return errors.New("still busy")
	})
	if err == nil || err.Error() != "still busy" {
		t.Fatalf("err = %v", err)
	}
}

func TestListenNamesTheAddress(t *testing.T) {
	t.Parallel()
	if _, err := Listen("256.0.0.1:0"); err == nil || !strings.HasPrefix(err.Error(), "cannot listen on 256.0.0.1:0: ") {
		t.Fatalf("err = %v", err)
	}
}

// Every server speaks HTTP/1.1 and, on the same port, cleartext HTTP/2 to a client that
// opens with it, which is how the router reaches Hubu and Gongbu.
func TestNewHTTPServerSpeaksHTTP1AndH2C(t *testing.T) {
	t.Parallel()
	srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto)
	}))
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	for _, c := range []struct {
		rt   http.RoundTripper
		want string
	}{{&http.Transport{}, "HTTP/1.1"}, {h2c, "HTTP/2.0"}} {
		resp, err := (&http.Client{Transport: c.rt, Timeout: 10 * time.Second}).Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatalf("%s: %v", c.want, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != c.want {
			t.Errorf("served %s, want %s", got, c.want)
		}
	}
}
