package registry

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"hubu.dev/hubu/sql/migrator"
	routersql "hubu.dev/hubu/sql/router"
	"hubu.dev/hubu/sql/sqltest"
)

// The same call id, the same request, from two agents (and the static token's agent) is three
// operations: each New, with keys and handles of its own. A redelivery, a result, a conflict and
// a handle are each found only within the agent's own calls, in memory (finals) as in the
// database.
func TestCallsAreTheAgents(t *testing.T) {
	t.Parallel()
	onBothBackends(t, testCallsAreTheAgents)
}

func testCallsAreTheAgents(t *testing.T, newState func() string) {
	ctx := context.Background()
	state := newState()
	r := open(t, state, nil)
	call := func(agent string) Call {
		return Call{Agent: agent, Platform: "codex", CallID: "call_sameIdTwoAgents000001", Scope: "scope-a", Tool: "generate_image", RequestHash: "h1"}
	}
	a, b, static := call("agent-a"), call("agent-b"), call("")

	ea, out, err := r.Resolve(ctx, a)
	if err != nil || out != New {
		t.Fatalf("agent a: %v %v", out, err)
	}
	// A's result is now in memory: B's delivery must not find it there.
	if _, err := r.Finish(ctx, a, []byte(`{"for":"a"}`)); err != nil {
		t.Fatal(err)
	}
	eb, out, err := r.Resolve(ctx, b)
	if err != nil || out != New || eb.Result != nil {
		t.Fatalf("agent b, the same call id as a's answered call: %v %v, result %s; want New", out, err, eb.Result)
	}
	es, out, err := r.Resolve(ctx, static)
	if err != nil || out != New {
		t.Fatalf("the static agent, the same call id: %v %v; want New", out, err)
	}
	keys := map[string]bool{ea.OperationKey: true, eb.OperationKey: true, es.OperationKey: true}
	handles := map[string]bool{ea.PublicHandle: true, eb.PublicHandle: true, es.PublicHandle: true}
	if len(keys) != 3 || len(handles) != 3 {
		t.Fatalf("%d keys and %d handles for three agents' calls; want three of each", len(keys), len(handles))
	}

	// Each agent's redelivery is its own call's: B's has no result yet, A's replays A's.
	if e, out, err := r.Resolve(ctx, b); err != nil || out != Continue || e.OperationKey != eb.OperationKey || e.Result != nil {
		t.Fatalf("agent b's redelivery: %v %v, own key %v, result %s; want Continue", out, err, e.OperationKey == eb.OperationKey, e.Result)
	}
	if _, err := r.Finish(ctx, b, []byte(`{"for":"b"}`)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		c    Call
		want string
	}{{a, `{"for":"a"}`}, {b, `{"for":"b"}`}} {
		if e, out, err := r.Resolve(ctx, d.c); err != nil || out != Replay || string(e.Result) != d.want {
			t.Fatalf("agent %q's redelivery: %v %v %s; want its own result %s", d.c.Agent, out, err, e.Result, d.want)
		}
	}
	// Another request or conversation under a call id another agent used is no conflict: it is
	// a call of its own.
	other := call("agent-c")
	other.RequestHash, other.Scope = "h2", "scope-b"
	if _, out, err := r.Resolve(ctx, other); err != nil || out != New {
		t.Fatalf("agent c, another request under the same call id: %v %v; want New", out, err)
	}
	// Within an agent the rules are as they were.
	conflict := a
	conflict.RequestHash = "h2"
	if _, out, err := r.Resolve(ctx, conflict); err != nil || out != Conflict {
		t.Fatalf("agent a, another request under its call id: %v %v; want Conflict", out, err)
	}

	// A handle is found only for its own agent; another agent's is as unknown as a made-up one.
	for _, d := range []struct {
		agent, handle, want string
	}{
		{"agent-a", ea.PublicHandle, ea.OperationKey},
		{"agent-b", eb.PublicHandle, eb.OperationKey},
		{"", es.PublicHandle, es.OperationKey},
		{"agent-b", ea.PublicHandle, ""},
		{"", ea.PublicHandle, ""},
		{"agent-a", es.PublicHandle, ""},
		{"agent-a", "hubu:public-operation:v1:unknown", ""},
	} {
		key, found, err := r.OperationKeyFor(ctx, d.agent, d.handle)
		if err != nil || found != (d.want != "") || key != d.want {
			t.Errorf("OperationKeyFor(%q, a handle of %s): found %v, right key %v, %v", d.agent, map[bool]string{true: "its own", false: "another agent or none"}[d.want != ""], found, key == d.want, err)
		}
	}

	// A router on the same registry that keeps nothing in memory reads the same from the rows.
	cold := open(t, state, &Options{FinalsBytes: -1})
	for _, d := range []struct {
		c    Call
		want string
	}{{a, `{"for":"a"}`}, {b, `{"for":"b"}`}} {
		if e, out, err := cold.Resolve(ctx, d.c); err != nil || out != Replay || string(e.Result) != d.want {
			t.Fatalf("agent %q's redelivery from the rows: %v %v %s; want %s", d.c.Agent, out, err, e.Result, d.want)
		}
	}
	if e, out, err := cold.Resolve(ctx, static); err != nil || out != Continue || e.OperationKey != es.OperationKey {
		t.Fatalf("the static agent's redelivery from the rows: %v %v", out, err)
	}
	if _, out, err := cold.Resolve(ctx, call("agent-d")); err != nil || out != New {
		t.Fatalf("agent d from the rows: %v %v; want New", out, err)
	}
	if n := queryValue[int64](t, r, "SELECT count(*) FROM calls"); n != 5 {
		t.Fatalf("%d rows; want one per agent: a, b, c, d and the static one", n)
	}
}

// Concurrent first deliveries of one call id by two agents, through two routers on one
// registry, make one row per agent: one New each, the rest Continue, one key each.
func TestAgentsRaceOnOneCallID(t *testing.T) {
	t.Parallel()
	onBothBackends(t, testAgentsRaceOnOneCallID)
}

func testAgentsRaceOnOneCallID(t *testing.T, newState func() string) {
	ctx := context.Background()
	state := newState()
	routers := []*Registry{open(t, state, nil), open(t, state, nil)}
	agents := []string{"agent-a", "agent-b"}
	var mu sync.Mutex
	news := map[string]int{}
	keys := map[string]map[string]bool{"agent-a": {}, "agent-b": {}}
	var wg sync.WaitGroup
	for d := range 24 {
		wg.Go(func() {
			agent := agents[d%2]
			c := Call{Agent: agent, Platform: "codex", CallID: "call_agentsRaceOneCallId01", Tool: "t", RequestHash: "h"}
			e, out, err := routers[d/2%2].Resolve(ctx, c)
			if err != nil || (out != New && out != Continue) {
				t.Errorf("%s: %v %v", agent, out, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if out == New {
				news[agent]++
			}
			keys[agent][e.OperationKey] = true
		})
	}
	wg.Wait()
	for _, agent := range agents {
		if news[agent] != 1 || len(keys[agent]) != 1 {
			t.Fatalf("%s: %d New, %d keys; want one of each", agent, news[agent], len(keys[agent]))
		}
	}
	for k := range keys["agent-a"] {
		if keys["agent-b"][k] {
			t.Fatal("two agents' calls share a key")
		}
	}
}

// A registry made before calls had an agent migrates, and its calls are the static token's
// agent's: an unfinished one continues under its key, a final one replays its result, and their
// handles are found for the static agent. The same call ids from another agent are new calls,
// and the old handles are not theirs.
func TestUpgradeKeepsTheStaticAgentsCalls(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		name string
		old  func(t *testing.T) string // a registry at the schema before agents, holding oldCalls
	}{
		{"sqlite", oldSQLiteRegistry},
		{"postgres", oldPostgresRegistry},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testUpgradeKeepsTheStaticAgentsCalls(t, b.old(t))
		})
	}
}

// oldCalls are the calls an old registry holds: one unfinished, one final.
var oldCalls = []struct {
	callID, key, handle string
	result              *string
}{
	{"call_beforeAgentsInFlight01", "hubu:operation:v1:codex:old-in-flight", "hubu:public-operation:v1:old-in-flight", nil},
	{"call_beforeAgentsFinal00001", "hubu:operation:v1:codex:old-final", "hubu:public-operation:v1:old-final", new(`{"final":"old"}`)},
}

func testUpgradeKeepsTheStaticAgentsCalls(t *testing.T, state string) {
	ctx := context.Background()
	r := open(t, state, nil)
	if r.InstallationID() != "inst-old" {
		t.Fatalf("installation %q after the upgrade", r.InstallationID())
	}
	for _, old := range oldCalls {
		c := Call{Platform: "codex", CallID: old.callID, Scope: "scope-a", Tool: "t", RequestHash: "h"}
		e, out, err := r.Resolve(ctx, c)
		want := Continue
		if old.result != nil {
			want = Replay
		}
		if err != nil || out != want || e.OperationKey != old.key || (old.result != nil && string(e.Result) != *old.result) {
			t.Fatalf("%s for the static agent after the upgrade: %v %v, key %q, result %s; want %v", old.callID, out, err, e.OperationKey, e.Result, want)
		}
		if key, found, err := r.OperationKeyFor(ctx, "", old.handle); err != nil || !found || key != old.key {
			t.Fatalf("%s's handle for the static agent: found %v, %v", old.callID, found, err)
		}
		c.Agent = "agent-a"
		if e, out, err := r.Resolve(ctx, c); err != nil || out != New || e.OperationKey == old.key || e.Result != nil {
			t.Fatalf("%s from another agent: %v %v; want New with a key of its own", old.callID, out, err)
		}
		if _, found, err := r.OperationKeyFor(ctx, "agent-a", old.handle); err != nil || found {
			t.Fatalf("%s's handle for another agent: found %v, %v; want not found", old.callID, found, err)
		}
	}
}

// migrationsUpTo is the up migrations of files numbered version or below, in order.
func migrationsUpTo(t *testing.T, files fs.FS, version int) fstest.MapFS {
	t.Helper()
	names, err := fs.Glob(files, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, name := range names {
		var n int
		if _, err := fmt.Sscanf(name, "%06d_", &n); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n > version {
			continue
		}
		b, err := fs.ReadFile(files, name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = &fstest.MapFile{Data: b}
	}
	return out
}

// oldSQLiteRegistry is a registry file at schema 2 (the last before agents), as a router of that
// release left it.
func oldSQLiteRegistry(t *testing.T) string {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := migrationsUpTo(t, routersql.Migrations(), 2)
	stmts := []string{}
	for _, name := range slices.Sorted(maps.Keys(old)) {
		stmts = append(stmts, string(old[name].Data))
	}
	stmts = append(stmts,
		`CREATE TABLE schema_migrations (version uint64, dirty bool)`,
		`INSERT INTO schema_migrations (version, dirty) VALUES (2, false)`,
		`INSERT INTO installation (singleton, installation_id, created_at) VALUES (1, 'inst-old', 0)`,
	)
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for _, c := range oldCalls {
		if _, err := db.ExecContext(ctx, `INSERT INTO calls (platform, installation_id, harness_call_id, tool, request_hash,
			operation_key, public_handle, scope_digest, result, created_at, updated_at)
			VALUES ('codex', 'inst-old', ?, 't', 'h', ?, ?, 'scope-a', ?, 0, 0)`, c.callID, c.key, c.handle, c.result); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// oldPostgresRegistry is a registry database at schema 1 (the last before agents), as a router
// of that release left it.
func oldPostgresRegistry(t *testing.T) string {
	ctx := context.Background()
	state := sqltest.NewEmptyDatabase(t, "router_registry")
	if err := migrator.Up(state, migrationsUpTo(t, routersql.PostgresMigrations(), 1)); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO installation (singleton, installation_id, created_at) VALUES (1, 'inst-old', now())`); err != nil {
		t.Fatal(err)
	}
	for _, c := range oldCalls {
		if _, err := conn.Exec(ctx, `INSERT INTO calls (platform, installation_id, harness_call_id, tool, request_hash,
			operation_key, public_handle, scope_digest, result, created_at, updated_at)
			VALUES ('codex', 'inst-old', $1, 't', 'h', $2, $3, 'scope-a', $4, now(), now())`, c.callID, c.key, c.handle, c.result); err != nil {
			t.Fatal(err)
		}
	}
	return state
}

// Going down to the schema without agents is refused while another agent than the static one
// has a call (it could be neither kept nor dropped safely), and leaves everything as it was;
// with the static agent's calls alone it goes down keeping them, and up again.
func TestDownWithoutAgentsKeepsOtherAgentsCalls(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "r.db")
		r := open(t, path, nil)
		static, agents := recordForDown(t, r)
		r.Close()

		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		down, err := fs.ReadFile(routersql.Migrations(), "000003_call_agent.down.sql")
		if err != nil {
			t.Fatal(err)
		}
		// As golang-migrate runs a migration on SQLite: one transaction.
		run := func() error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback() //nolint:errcheck // a no-op after commit
			if _, err := tx.ExecContext(ctx, string(down)); err != nil {
				return err
			}
			return tx.Commit()
		}
		if err := run(); err == nil || !strings.Contains(err.Error(), "calls_of_other_agents_than_the_static_one_cannot_go_down") {
			t.Fatalf("down with another agent's call: %v; want it refused", err)
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM calls WHERE agent <> ''`).Scan(&n); err != nil || n != agents {
			t.Fatalf("after the refused down: %d calls of other agents (%v); want %d", n, err, agents)
		}
		if _, err := db.ExecContext(ctx, `DELETE FROM calls WHERE agent <> ''`); err != nil {
			t.Fatal(err)
		}
		if err := run(); err != nil {
			t.Fatalf("down with the static agent's calls alone: %v", err)
		}
		if _, err := db.ExecContext(ctx, `UPDATE schema_migrations SET version = 2`); err != nil {
			t.Fatal(err)
		}
		upAgain(t, path, static)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		state := sqltest.NewEmptyDatabase(t, "router_registry")
		r := open(t, state, nil)
		static, agents := recordForDown(t, r)
		r.Close()

		latest, err := migrator.Latest(routersql.PostgresMigrations())
		if err != nil {
			t.Fatal(err)
		}
		if err := migrator.Down(state, routersql.PostgresMigrations(), 1); err == nil || !strings.Contains(err.Error(), "calls of agents other than the static one") {
			t.Fatalf("down with another agent's call: %v; want it refused", err)
		}
		conn, err := pgx.Connect(ctx, state)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM calls WHERE agent <> ''`).Scan(&n); err != nil || n != agents {
			t.Fatalf("after the refused down: %d calls of other agents (%v); want %d", n, err, agents)
		}
		// golang-migrate marks a failed migration dirty for an operator to see, who then forces
		// the version the schema is at: the latest, as the migration's transaction rolled back.
		if st, err := migrator.Version(state, routersql.PostgresMigrations()); err != nil || !st.Dirty {
			t.Fatalf("after the refused down: %+v %v; want it marked dirty", st, err)
		}
		if _, err := conn.Exec(ctx, `UPDATE schema_migrations SET version = $1, dirty = false`, latest); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `DELETE FROM calls WHERE agent <> ''`); err != nil {
			t.Fatal(err)
		}
		if err := migrator.Down(state, routersql.PostgresMigrations(), 1); err != nil {
			t.Fatalf("down with the static agent's calls alone: %v", err)
		}
		if st, err := migrator.Version(state, routersql.PostgresMigrations()); err != nil || st.Dirty || st.Version != latest-1 {
			t.Fatalf("after down: %+v %v; want version %d", st, err, latest-1)
		}
		upAgain(t, state, static)
	})
}

// recordForDown records a call of the static agent and the same call id from two others, and
// returns the static agent's entry and how many calls the others have.
func recordForDown(t *testing.T, r *Registry) (Entry, int) {
	t.Helper()
	ctx := context.Background()
	c := Call{Platform: "codex", CallID: "call_downWithAgents000001", Tool: "t", RequestHash: "h"}
	static, _, err := r.Resolve(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finish(ctx, c, []byte(`{"for":"static"}`)); err != nil {
		t.Fatal(err)
	}
	for _, agent := range []string{"agent-a", "agent-b"} {
		c.Agent = agent
		if _, out, err := r.Resolve(ctx, c); err != nil || out != New {
			t.Fatalf("%s: %v %v", agent, out, err)
		}
	}
	return static, 2
}

// upAgain opens a registry that was taken down past the agents' migration, and finds the static
// agent's call recorded before, with its key and result.
func upAgain(t *testing.T, state string, static Entry) {
	t.Helper()
	ctx := context.Background()
	r := open(t, state, nil)
	c := Call{Platform: "codex", CallID: "call_downWithAgents000001", Tool: "t", RequestHash: "h"}
	if e, out, err := r.Resolve(ctx, c); err != nil || out != Replay || e.OperationKey != static.OperationKey || string(e.Result) != `{"for":"static"}` {
		t.Fatalf("the static agent's call after down and up: %v %v %s", out, err, e.Result)
	}
	c.Agent = "agent-a"
	if _, out, err := r.Resolve(ctx, c); err != nil || out != New {
		t.Fatalf("another agent after down and up: %v %v", out, err)
	}
}
