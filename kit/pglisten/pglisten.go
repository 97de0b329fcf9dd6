// Package pglisten keeps one PostgreSQL connection LISTENing on a few channels and hands
// each notification to the handler registered for its channel.
//
// Notifications are a wake-up, never the record: Postgres delivers them only to sessions
// listening when the notifying transaction commits, so a listener that was disconnected
// misses them. Every user therefore keeps a backstop (a periodic re-read) and registers
// OnGap, which runs whenever notifications may have been missed: when the connection is
// lost, and each time it is established again (after LISTEN, so a re-read then sees
// everything a later notification would announce).
package pglisten

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"hubu.dev/hubu/kit/pgstart"
)

// Reconnection waits: the first after a failure, doubled after each further one up to the
// longest. A connection that stayed up for MaxBackoff starts the doubling over.
const (
	MinBackoff = 100 * time.Millisecond
	MaxBackoff = 5 * time.Second
)

// Listener is one LISTENing connection. Register handlers before Run; Run owns the
// connection until its context ends.
type Listener struct {
	connString string
	logger     *slog.Logger
	handlers   map[string]func(payload string)
	gaps       []func()
	connected  atomic.Bool
	running    atomic.Bool
}

// New returns a Listener that connects with connString (a PostgreSQL URL or DSN). Errors it
// logs never hold the connection string.
func New(connString string, logger *slog.Logger) *Listener {
	return &Listener{connString: connString, logger: cmp.Or(logger, slog.New(slog.DiscardHandler)), handlers: map[string]func(string){}}
}

// Handle registers f for channel's notifications. f runs on the listener's goroutine, one
// notification at a time, and must not block: hand the payload on and return.
func (l *Listener) Handle(channel string, f func(payload string)) {
	l.mustNotRun()
	l.handlers[channel] = f
}

// OnGap registers f, called on the listener's goroutine whenever notifications may have been
// missed: the connection was lost, or it was (re)established. f must not block.
func (l *Listener) OnGap(f func()) {
	l.mustNotRun()
	l.gaps = append(l.gaps, f)
}

// Connected reports whether the connection is LISTENing now. A cache that drops its entries
// on a gap may serve them only while this holds.
func (l *Listener) Connected() bool { return l.connected.Load() }

func (l *Listener) mustNotRun() {
	if l.running.Load() {
		panic("pglisten: register handlers before Run")
	}
}

// Run listens until ctx ends, reconnecting with backoff whenever the connection fails.
func (l *Listener) Run(ctx context.Context) {
	l.running.Store(true)
	backoff := MinBackoff
	for {
		began := time.Now()
		err := l.listen(ctx)
		if l.connected.Swap(false) {
			l.gap()
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) >= MaxBackoff {
			backoff = MinBackoff
		}
		l.logger.WarnContext(ctx, "notification listener disconnected; reconnecting", "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, MaxBackoff)
	}
}

// listen runs one connection: LISTEN on every channel, announce the gap, then deliver
// notifications until the connection or ctx ends.
func (l *Listener) listen(ctx context.Context) error {
	// Parsed as a pool's URL, so that pool settings in it (pool_max_conns, ...) are
	// understood rather than sent to the server as unknown parameters.
	poolCfg, err := pgxpool.ParseConfig(l.connString)
	if err != nil {
		return errors.New("the database URL is not valid")
	}
	cfg := poolCfg.ConnConfig
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "pglisten"
	}
	connectCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(connectCtx, cfg)
	cancel()
	if err != nil {
		return errors.New(pgstart.Summary(err))
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	for channel := range l.handlers {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			return fmt.Errorf("listen on %s: %w", channel, err)
		}
	}
	l.connected.Store(true)
	l.gap()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if f := l.handlers[n.Channel]; f != nil {
			f(n.Payload)
		}
	}
}

func (l *Listener) gap() {
	for _, f := range l.gaps {
		f()
	}
}
