package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ShutdownGrace is how long requests in flight get to finish once a server is told to stop.
const ShutdownGrace = 15 * time.Second

// NewHTTPServer returns a server for handler with the limits every binary uses: 10 s for a
// request's headers and 30 s for all of it, 64 KiB of headers, 2 min to write an answer and
// 2 min before an idle connection is closed. A server whose answers may rightly take longer
// raises WriteTimeout (0: none, for responses held open). Over HTTP/2 the read and write
// limits hold for each request.
//
// It speaks HTTP/1.1 and, on the same port, cleartext HTTP/2 to a client that opens with it
// (prior knowledge): the router sends all its requests in flight to Hubu and Gongbu on one
// such connection (httpjson.H2CTransport) instead of a connection each.
func NewHTTPServer(handler http.Handler) *http.Server {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	return srv
}

// Listen listens on the TCP address addr; port 0 picks one.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %v", addr, err)
	}
	return ln, nil
}

// Serve serves srv on ln until ctx ends or serving fails, then shuts srv down: requests in
// flight get grace to finish, and then drain, if not nil, gets what is left of it (to wait
// for work the requests started). An error serving wins over one shutting down.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, logger *slog.Logger, grace time.Duration, drain func(context.Context) error) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if err != nil {
		err = fmt.Errorf("shutdown: %w", err)
	}
	if drain != nil {
		err = errors.Join(err, drain(shutdownCtx))
	}
	if serveErr != nil {
		return serveErr
	}
	return err
}
