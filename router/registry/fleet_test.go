package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"hubu.dev/hubu/sql/migrator"
	routersql "hubu.dev/hubu/sql/router"
	"hubu.dev/hubu/sql/sqltest"
)

// A router fleet: two registries on one registry (for Postgres two pools, as two routers have)
// race many deliveries of the same calls. Each call gets one row: exactly one New, the rest
// Continue, one operation key; of two results recorded at once, both routers keep the same one;
// and closing and reopening keeps the installation, the calls, their keys and their results.
func TestFleetRace(t *testing.T) {
	t.Parallel()
	onBothBackends(t, testFleetRace)
}

func testFleetRace(t *testing.T, newState func() string) {
	ctx := context.Background()
	state := newState()
	routers := []*Registry{open(t, state, nil), open(t, state, nil)}
	if routers[0].InstallationID() != routers[1].InstallationID() {
		t.Fatal("two routers on one registry have two installation ids")
	}
	const calls, deliveries = 12, 8
	call := func(i int) Call {
		return Call{Platform: "codex", CallID: fmt.Sprintf("call_fleetRace%014d", i), Scope: "scope-a", Tool: "generate_image", RequestHash: "h"}
	}
	type seen struct {
		news int
		keys map[string]bool
	}
	var mu sync.Mutex
	byCall := make([]seen, calls)
	for i := range byCall {
		byCall[i].keys = map[string]bool{}
	}
	var wg sync.WaitGroup
	for d := range calls * deliveries {
		wg.Go(func() {
			i := d % calls
			e, out, err := routers[d/calls%2].Resolve(ctx, call(i))
			if err != nil || (out != New && out != Continue) {
				t.Errorf("call %d: %v %v", i, out, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if out == New {
				byCall[i].news++
			}
			byCall[i].keys[e.OperationKey] = true
		})
	}
	wg.Wait()
	keys := make([]string, calls)
	for i, s := range byCall {
		if s.news != 1 || len(s.keys) != 1 {
			t.Fatalf("call %d: %d New, %d keys; want one of each", i, s.news, len(s.keys))
		}
		for k := range s.keys {
			keys[i] = k
		}
	}

	// Both routers finish the even calls at once, each with its own result.
	results := make([][2]string, calls)
	for i := 0; i < calls; i += 2 {
		for r := range routers {
			wg.Go(func() {
				e, err := routers[r].Finish(ctx, call(i), []byte(fmt.Sprintf(`{"by":%d}`, r)))
				if err != nil {
					t.Errorf("finish %d by %d: %v", i, r, err)
				}
				results[i][r] = string(e.Result)
			})
		}
	}
	wg.Wait()
	for i := 0; i < calls; i += 2 {
		if got := results[i]; got[0] != got[1] || !strings.HasPrefix(got[0], `{"by":`) {
			t.Fatalf("call %d: the routers recorded %q and %q; want one result kept", i, got[0], got[1])
		}
	}

	id := routers[0].InstallationID()
	for _, r := range routers {
		r.Close()
	}
	again := open(t, state, nil)
	if again.InstallationID() != id {
		t.Fatal("the installation id changed on reopening")
	}
	for i := range calls {
		e, out, err := again.Resolve(ctx, call(i))
		want := Continue
		if i%2 == 0 {
			want = Replay
		}
		if err != nil || out != want || e.OperationKey != keys[i] || (want == Replay && string(e.Result) != results[i][0]) {
			t.Fatalf("call %d after reopening: %v %v, same key %v, result %s; want %v", i, out, err, e.OperationKey == keys[i], e.Result, want)
		}
		if key, ok, err := again.OperationKeyFor(ctx, "", e.PublicHandle); err != nil || !ok || key != keys[i] {
			t.Fatalf("call %d: the key behind its handle after reopening: %v %v", i, ok, err)
		}
	}
}

// Routers that start at once on a new database migrate it once between them (golang-migrate
// holds an advisory lock) and make one installation id.
func TestPostgresRoutersStartTogether(t *testing.T) {
	t.Parallel()
	state := sqltest.NewEmptyDatabase(t, "router_registry")
	const routers = 4
	ids := make([]string, routers)
	var wg sync.WaitGroup
	for i := range routers {
		wg.Go(func() {
			r, err := Open(context.Background(), state, nil)
			if err != nil {
				t.Errorf("router %d: %v", i, err)
				return
			}
			defer r.Close()
			ids[i] = r.InstallationID()
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("installation ids %v; want one", ids)
		}
	}
	latest, err := migrator.Latest(routersql.PostgresMigrations())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := migrator.Version(state, routersql.PostgresMigrations()); err != nil || st.Dirty || st.Version != latest {
		t.Fatalf("schema %+v %v; want version %d", st, err, latest)
	}
}

// The Postgres migrations go down as well as up: `down` leaves an empty database that the
// registry migrates again.
func TestPostgresMigrationsDownAndUp(t *testing.T) {
	t.Parallel()
	state := sqltest.NewEmptyDatabase(t, "router_registry")
	open(t, state, nil).Close()
	if err := migrator.Down(state, routersql.PostgresMigrations(), 0); err != nil {
		t.Fatal(err)
	}
	if st, err := migrator.Version(state, routersql.PostgresMigrations()); err != nil || st.Version != 0 {
		t.Fatalf("after down: %+v %v", st, err)
	}
	r := open(t, state, nil)
	if _, out, err := r.Resolve(context.Background(), Call{Platform: "codex", CallID: "call_afterDownAndUp00001", Tool: "t", RequestHash: "h"}); err != nil || out != New {
		t.Fatalf("after down and up: %v %v", out, err)
	}
}

// A database URL's password never reaches an error, nor the form of the URL that is logged.
func TestPostgresPasswordStaysOut(t *testing.T) {
	t.Parallel()
	const pw = "registry-db-secret-8d1f"
	for _, state := range []string{
		"postgres://router:" + pw + "@127.0.0.1:1/registry?sslmode=disable&connect_timeout=5",
		"postgresql://router@127.0.0.1:1/registry?password=" + pw + "&sslmode=disable",
		"postgres://router@127.0.0.1:1/registry?sslpassword=" + pw + "&sslmode=disable",
	} {
		if _, err := Open(context.Background(), state, nil); err == nil || strings.Contains(err.Error(), pw) {
			t.Errorf("opening an unreachable database: %v; want an error without the password", err)
		}
		if shown := Redact(state); strings.Contains(shown, pw) || !strings.Contains(shown, "127.0.0.1:1/registry") {
			t.Errorf("Redact(%q) = %q", state, shown)
		}
	}
	dsn := "host=127.0.0.1 port=1 dbname=registry user=router password=" + pw
	if _, err := Open(context.Background(), dsn, nil); !errors.Is(err, errKeywordDSN) || strings.Contains(err.Error(), pw) {
		t.Errorf("opening a keyword=value connection string: %v; want it refused without the password", err)
	}
	if shown := Redact(dsn); strings.Contains(shown, pw) {
		t.Errorf("Redact(%q) = %q", dsn, shown)
	}
	if got := Redact("/var/lib/hubu/router.db"); got != "/var/lib/hubu/router.db" {
		t.Errorf("a file path redacted to %q", got)
	}
}

// A registry database whose default is asynchronous commit (set by an operator, or inherited)
// still gets the registry's rows on disk before Resolve returns: its sessions ask for
// synchronous commit themselves.
func TestPostgresCommitsSynchronously(t *testing.T) {
	t.Parallel()
	state := sqltest.NewEmptyDatabase(t, "router_registry")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var name string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" SET synchronous_commit = off"); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	var plain string
	if err := other.QueryRow(ctx, "SHOW synchronous_commit").Scan(&plain); err != nil || plain != "off" {
		t.Fatalf("a plain session of the database commits with synchronous_commit %q (%v): the test proves nothing", plain, err)
	}
	r := open(t, state, nil)
	if got := queryValue[string](t, r, "SHOW synchronous_commit"); got != "on" {
		t.Fatalf("the registry's sessions commit with synchronous_commit %q, want on", got)
	}
}

// raceKeys is a key source that, the first time it is asked, lets another router record the
// call first and then refuses, as preallocated keys do when none is left.
type raceKeys struct {
	other *Registry
	call  Call
	won   Entry
}

func (k *raceKeys) NewKey(ctx context.Context, _ string) (string, error) {
	e, res, err := k.other.Resolve(ctx, k.call)
	if err != nil || res != New {
		return "", fmt.Errorf("the other router: %v, %v", res, err)
	}
	k.won = e
	return "", ErrNewOperationRefused
}

// A call another router records while this one makes its keys is that router's call: this
// delivery continues it, even when this router's key source would have refused a new one.
func TestPostgresLostRaceWhileMakingKeys(t *testing.T) {
	t.Parallel()
	state := sqltest.NewEmptyDatabase(t, "router_registry")
	c := Call{Platform: "codex", CallID: "call_raceWhileMakingKeys0001", Tool: "generate_image", RequestHash: "h1"}
	keys := &raceKeys{other: open(t, state, nil), call: c}
	r := open(t, state, &Options{Keys: keys})
	e, res, err := r.Resolve(context.Background(), c)
	if errors.Is(err, ErrNewOperationRefused) || err != nil || res != Continue {
		t.Fatalf("resolve: %v, %v; want the other router's call continued", res, err)
	}
	if e.OperationKey == "" || e.OperationKey != keys.won.OperationKey || e.PublicHandle != keys.won.PublicHandle {
		t.Fatalf("continued under %q / %q, the other router recorded %q / %q", e.OperationKey, e.PublicHandle, keys.won.OperationKey, keys.won.PublicHandle)
	}
}
