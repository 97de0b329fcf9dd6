package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"hubu.dev/hubu/kit/command/commandtest"
	gongbusql "hubu.dev/hubu/sql/gongbu"
	"hubu.dev/hubu/sql/migrator"
	"hubu.dev/hubu/sql/sqltest"
)

// A value in the environment that does not parse stops the start and names the variable; it
// never falls back to the default.
func TestBadValuesInTheEnvironment(t *testing.T) {
	t.Parallel()
	const duration = " must be a duration such as 90s or 10m, not "
	for _, c := range []struct{ env, want string }{
		{"GONGBU_LEASE=5x", "GONGBU_LEASE" + duration + `"5x"`},
		{"GONGBU_POLL_INTERVAL=5x", "GONGBU_POLL_INTERVAL" + duration + `"5x"`},
		{"GONGBU_POLL_DEADLINE=10", "GONGBU_POLL_DEADLINE" + duration + `"10"`},
		{"GONGBU_FLUX_TIMEOUT=1 minute", "GONGBU_FLUX_TIMEOUT" + duration + `"1 minute"`},
		{"GONGBU_FLUX_IDEMPOTENT=yes", `GONGBU_FLUX_IDEMPOTENT must be true or false, not "yes"`},
	} {
		commandtest.Refuses(t, run, append([]string{"GONGBU_DATABASE_URL=postgres://127.0.0.1:1/gongbu", c.env}, serveEnv...), []string{"serve"}, c.want)
	}
}

// The secrets may be given as files (X_FILE); X and X_FILE together are refused; and no
// secret reaches an error, the help or the log.
func TestSecretsFromFiles(t *testing.T) {
	t.Parallel()
	urlFile := commandtest.File(t, sqltest.NewDatabase(t, "gongbu", gongbusql.Migrations())+"\n")
	if out, _, err := runGongbu(t, []string{"GONGBU_DATABASE_URL_FILE=" + urlFile}, "migrate", "version"); err != nil || out != fmt.Sprintf("version %d\n", latestMigration(t)) {
		t.Fatalf("migrate with GONGBU_DATABASE_URL_FILE: %q %v", out, err)
	}
	secrets := []string{"pw-not-to-show-5c2e", "hubu_service_not-to-show-11aa", "service-not-to-show-22bb", "flux-not-to-show-33cc"}
	unreachable := commandtest.File(t, "postgres://gongbu:"+secrets[0]+"@127.0.0.1:1/gongbu?connect_timeout=2")
	files := []string{"GONGBU_HUBU_URL=http://127.0.0.1:1", "GONGBU_FLUX_URL=http://127.0.0.1:1", "GONGBU_URL=http://127.0.0.1:1",
		"GONGBU_HUBU_TOKEN_FILE=" + commandtest.File(t, secrets[1]), "GONGBU_SERVICE_TOKEN_FILE=" + commandtest.File(t, secrets[2]+"\n"),
		"GONGBU_FLUX_KEY_FILE=" + commandtest.File(t, secrets[3]+"\n")}
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"GONGBU_DATABASE_URL=postgres://x/y", "GONGBU_DATABASE_URL_FILE=" + urlFile}, []string{"migrate", "up"}, "GONGBU_DATABASE_URL and GONGBU_DATABASE_URL_FILE are both set: set one"},
		{append([]string{"GONGBU_DATABASE_URL_FILE=" + urlFile, "GONGBU_FLUX_KEY=" + secrets[3]}, files...), []string{"serve"}, "GONGBU_FLUX_KEY and GONGBU_FLUX_KEY_FILE are both set: set one"},
		{append([]string{"GONGBU_SERVICE_TOKEN_FILE=" + missing}, files[:4]...), []string{"reconcile"}, "GONGBU_SERVICE_TOKEN_FILE: open " + missing + ": no such file or directory"},
		{append([]string{"GONGBU_DATABASE_URL_FILE=" + unreachable}, files...), []string{"serve"}, "cannot reach the database: failed to connect: "},
		{[]string{"GONGBU_DATABASE_URL_FILE=" + unreachable}, []string{"renew-epoch"}, "cannot reach the database: failed to connect: "},
		{append([]string{"GONGBU_DATABASE_URL_FILE=" + unreachable}, files...), []string{"serve", "--help"}, "flag: help requested"},
	} {
		commandtest.Refuses(t, run, c.env, c.args, c.want, secrets...)
	}

	_, stop := commandtest.Start(t, run, append([]string{"GONGBU_DATABASE_URL_FILE=" + urlFile}, files...), "serve", "--listen", "127.0.0.1:0")
	stop(secrets...)
}

// latestMigration is the version `migrate up` ends at.
func latestMigration(t *testing.T) uint {
	t.Helper()
	latest, err := migrator.Latest(gongbusql.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	return latest
}
