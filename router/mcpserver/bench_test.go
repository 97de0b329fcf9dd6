package mcpserver_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"
)

// BenchmarkRouter measures a spend through the router over the SDK's in-memory transport,
// with a loopback fake Hubu and Gongbu: a new call (identity, hash, a durable registry
// insert, the forward, the final-result write) and a redelivery (identity, hash, a registry
// read, the recorded answer, no backend). BenchmarkSQLiteCommit is one durable commit on
// the same kind of file, the unit the new call pays twice.
func BenchmarkRouter(b *testing.B) {
	b.Run("new call", func(b *testing.B) {
		e := setup(b, nil)
		b.ResetTimer()
		for i := range b.N {
			res := e.call(b, "generate_image", fox, codex(fmt.Sprintf("call_benchnew%016d", i)))
			if res.IsError {
				b.Fatal(text(res))
			}
		}
	})
	b.Run("redelivery", func(b *testing.B) {
		e := setup(b, nil)
		if res := e.call(b, "generate_image", fox, codex("call_benchagainKCafBphPMEgBuQ")); res.IsError {
			b.Fatal(text(res))
		}
		b.ResetTimer()
		for range b.N {
			if res := e.call(b, "generate_image", fox, codex("call_benchagainKCafBphPMEgBuQ")); res.IsError {
				b.Fatal(text(res))
			}
		}
	})
	b.Run("backend round trip alone", func(b *testing.B) {
		e := setup(b, nil)
		b.ResetTimer()
		for range b.N {
			if res := e.call(b, "capabilities", `{}`, nil); res.IsError {
				b.Fatal(text(res))
			}
		}
	})
}

// BenchmarkRouterHTTP is the redelivery against its floor, as make loadtest's latency
// scenario measures them, over the streamable HTTP transport the router serves (one session,
// the SDK's client): a tools/list, the least any call costs, and a redelivery answered from
// the registry. Besides the time per call it reports the CPU time per call of the whole
// process (client, router and fakes): on a shared machine the two terms of a ratio move less
// in CPU time than in wall time.
func BenchmarkRouterHTTP(b *testing.B) {
	b.Run("tools/list", func(b *testing.B) {
		cs := httpSession(b, setup(b, nil))
		perCall(b, func() error {
			_, err := cs.ListTools(context.Background(), nil)
			return err
		})
	})
	b.Run("redelivery", func(b *testing.B) {
		cs := httpSession(b, setup(b, nil))
		call := func() error {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "generate_image", Arguments: json.RawMessage(fox),
				Meta: mcp.Meta{"callId": "call_benchHTTPaKCafBphPMEgBuQ"}})
			if err == nil && res.IsError {
				err = errors.New(text(res))
			}
			return err
		}
		if err := call(); err != nil {
			b.Fatal(err)
		}
		perCall(b, call)
	})
}

// httpSession serves e's router over streamable HTTP and connects a client to it.
func httpSession(b *testing.B, e *env) *mcp.ClientSession {
	server := e.router.Server("bench")
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	b.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// perCall runs call b.N times and reports the process's CPU time per call beside the time.
func perCall(b *testing.B, call func() error) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ResetTimer()
	start := cpu()
	for range b.N {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpu()-start)/float64(b.N)/1e3, "cpu-µs/op")
}

func BenchmarkSQLiteCommit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "commit.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES (?, ?)", fmt.Sprint(i), "x"); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}
