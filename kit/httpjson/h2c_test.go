package httpjson

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// protoServer serves on addr (127.0.0.1:0 for any port) what a server of this release does
// (HTTP/1.1 and h2c) when h2c is true, else what one of an earlier release does (HTTP/1.1
// only). Every request but /healthz and a probe's "PRI *" is echoed and counted by protocol;
// so are the connections.
type protoServer struct {
	srv                *http.Server
	addr               string
	conns, h1, h2, pri atomic.Int64
}

func startProtoServer(t *testing.T, addr string, speaksH2C bool, handle func(http.ResponseWriter, *http.Request)) *protoServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &protoServer{addr: ln.Addr().String()}
	s.srv = &http.Server{Protocols: new(http.Protocols), ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "PRI":
			s.pri.Add(1)
			http.Error(w, "no", http.StatusBadRequest)
			return
		case r.URL.Path == "/healthz":
			return
		case r.ProtoMajor == 2:
			s.h2.Add(1)
		default:
			s.h1.Add(1)
		}
		if handle != nil {
			handle(w, r)
			return
		}
		_, _ = io.Copy(w, r.Body)
	})}
	s.srv.Protocols.SetHTTP1(true)
	s.srv.Protocols.SetUnencryptedHTTP2(speaksH2C)
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { s.srv.Close() })
	return s
}

func post(t *testing.T, c *http.Client, addr, body string) (string, error) {
	t.Helper()
	resp, err := c.Post("http://"+addr+"/v1/authorizations", "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// A server of this release gets every request over h2c, all of those in flight on the one
// connection the probe opened.
func TestH2CTransportSendsEverythingOnOneConnection(t *testing.T) {
	t.Parallel()
	const n = 20
	var arrived sync.WaitGroup
	arrived.Add(n)
	s := startProtoServer(t, "127.0.0.1:0", true, func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		arrived.Wait() // all n are in flight at once
		_, _ = io.Copy(w, r.Body)
	})
	c := &http.Client{Transport: NewH2CTransport(PooledTransport()), Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := strings.Repeat("x", i)
			if got, err := post(t, c, s.addr, body); err != nil || got != body {
				t.Errorf("request %d: %q, %v", i, got, err)
			}
		})
	}
	wg.Wait()
	if s.h2.Load() != n || s.h1.Load() != 0 || s.conns.Load() != 1 {
		t.Fatalf("%d requests over h2c and %d over HTTP/1.1 on %d connections, want %d over h2c on 1", s.h2.Load(), s.h1.Load(), s.conns.Load(), n)
	}
}

// A server of an earlier release gets every request, the first one too, over HTTP/1.1: only
// the probe tried h2c.
func TestH2CTransportFallsBackToHTTP1(t *testing.T) {
	t.Parallel()
	s := startProtoServer(t, "127.0.0.1:0", false, nil)
	c := &http.Client{Transport: NewH2CTransport(PooledTransport()), Timeout: 10 * time.Second}
	for i := range 3 {
		if got, err := post(t, c, s.addr, `{"n":1}`); err != nil || got != `{"n":1}` {
			t.Fatalf("request %d: %q, %v", i, got, err)
		}
	}
	if s.h1.Load() != 3 || s.h2.Load() != 0 || s.pri.Load() != 1 {
		t.Fatalf("%d over HTTP/1.1, %d over h2c, %d probes seen as PRI; want 3, 0, 1", s.h1.Load(), s.h2.Load(), s.pri.Load())
	}
}

// A server replaced by one of an earlier release on the same address costs one request its
// answer (it fails, as over a dropped connection); the next probes and goes over HTTP/1.1.
// Once the address speaks h2c again, the client moves back to it after http1For. Each move is
// logged once: the failed request's probe and the later ones find nothing new.
func TestH2CTransportFollowsTheServerAcrossReleases(t *testing.T) {
	t.Parallel()
	tr := NewH2CTransport(PooledTransport())
	var logs bytes.Buffer // written by the requests' goroutine, which is this one
	tr.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC).UnixNano())
	tr.now = func() time.Time { return time.Unix(0, now.Load()) }
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	newer := startProtoServer(t, "127.0.0.1:0", true, nil)
	if _, err := post(t, c, newer.addr, "a"); err != nil || newer.h2.Load() != 1 {
		t.Fatalf("before: %v, %d over h2c", err, newer.h2.Load())
	}
	// Each server is closed with its connections; the client's idle ones are closed too, or a
	// request might go out on one before the client saw it close (a race of HTTP/1.1's pool
	// with or without this transport).
	newer.srv.Close()
	c.CloseIdleConnections()
	older := startProtoServer(t, newer.addr, false, nil)
	failed := 0
	for i := range 3 {
		if got, err := post(t, c, older.addr, "b"); err != nil {
			failed++
		} else if got != "b" {
			t.Fatalf("request %d: %q", i, got)
		}
	}
	if failed > 1 || older.h1.Load() != int64(3-failed) || older.h2.Load() != 0 {
		t.Fatalf("after the downgrade: %d failed, %d over HTTP/1.1, %d over h2c", failed, older.h1.Load(), older.h2.Load())
	}
	now.Add(int64(http1For)) // asked again, and still HTTP/1.1: nothing new to log
	pri := older.pri.Load()
	if _, err := post(t, c, older.addr, "b"); err != nil || older.pri.Load() != pri+1 {
		t.Fatalf("after http1For on the earlier release: %v, %d probes over h2c, want 1", err, older.pri.Load()-pri)
	}

	older.srv.Close()
	c.CloseIdleConnections()
	again := startProtoServer(t, newer.addr, true, nil)
	if _, err := post(t, c, again.addr, "c"); err != nil || again.h1.Load() != 1 {
		t.Fatalf("within http1For of the probe: %v, %d over HTTP/1.1", err, again.h1.Load())
	}
	now.Add(int64(http1For))
	if _, err := post(t, c, again.addr, "d"); err != nil || again.h2.Load() != 1 {
		t.Fatalf("after http1For: %v, %d over h2c", err, again.h2.Load())
	}

	var found []string
	for line := range strings.Lines(logs.String()) {
		if !strings.Contains(line, "host="+newer.addr) {
			t.Fatalf("a line without the host: %s", line)
		}
		level, _, _ := strings.Cut(strings.SplitN(line, "level=", 2)[1], " ")
		found = append(found, level+" "+strings.SplitN(line, `msg="backend `, 2)[1][:12])
	}
	if want := []string{"INFO speaks HTTP/", "WARN answers only", "INFO speaks HTTP/"}; !slices.Equal(found, want) {
		t.Fatalf("logged %q, want %q:\n%s", found, want, logs.String())
	}
}

// A host that is down gets the request's own error, and is probed again once it is up.
func TestH2CTransportProbesAHostThatWasDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := &http.Client{Transport: NewH2CTransport(PooledTransport()), Timeout: 10 * time.Second}
	if _, err := post(t, c, addr, "a"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("to a host that is down: %v", err)
	}
	s := startProtoServer(t, addr, true, nil)
	if _, err := post(t, c, addr, "b"); err != nil || s.h2.Load() != 1 {
		t.Fatalf("once up: %v, %d over h2c", err, s.h2.Load())
	}
}

// A connection that goes silent (every byte dropped, no reset) fails the requests on it once a
// ping goes unanswered, instead of holding them, and every request after them, until their
// timeouts; the next request gets a connection of its own. The test shortens the ping's timings.
func TestH2CTransportDropsASilentConnection(t *testing.T) {
	t.Parallel()
	s := startProtoServer(t, "127.0.0.1:0", true, nil)
	hole := startBlackhole(t, s.addr)
	c := &http.Client{Transport: newH2CTransport(PooledTransport(), 200*time.Millisecond, 300*time.Millisecond), Timeout: 30 * time.Second}
	if _, err := post(t, c, hole.addr, "a"); err != nil {
		t.Fatal(err)
	}
	hole.silent.Store(true)
	began := time.Now()
	if _, err := post(t, c, hole.addr, "b"); err == nil {
		t.Fatal("a request on a silent connection was answered")
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("a request on a silent connection failed after %s", took)
	}
	hole.silent.Store(false)
	if got, err := post(t, c, hole.addr, "c"); err != nil || got != "c" {
		t.Fatalf("after the silent connection: %q, %v", got, err)
	}
	if s.conns.Load() < 2 || s.h2.Load() != 2 {
		t.Fatalf("%d connections, %d requests over h2c; want a new connection and 2 over h2c", s.conns.Load(), s.h2.Load())
	}
}

// blackhole forwards TCP connections to a server, and while silent drops every byte both ways
// without closing anything, as a network path that lost its state does.
type blackhole struct {
	addr   string
	silent atomic.Bool
}

func startBlackhole(t *testing.T, to string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	b := &blackhole{addr: ln.Addr().String()}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 && !b.silent.Load() {
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", to)
			if err != nil {
				in.Close()
				continue
			}
			t.Cleanup(func() { in.Close(); out.Close() })
			go pipe(out, in)
			go pipe(in, out)
		}
	}()
	return b
}
