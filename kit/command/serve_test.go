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
