package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"hubu.dev/hubu/kit/command/commandtest"
	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/migrator"
	"hubu.dev/hubu/sql/sqltest"
)

// A value in the environment that does not parse stops the start and names the setting; it
// never falls back to the default.
func TestBadValuesInTheEnvironment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ env, want string }{
		{"HUBU_RETRY_AFTER=5x", `HUBU_RETRY_AFTER must be a duration such as 90s or 10m, not "5x"`},
		{"HUBU_CACHE_TTL=5x", `HUBU_CACHE_TTL must be a duration such as 90s or 10m, not "5x"`},
		// Read as text and checked after, with one message for the flag and the variable.
		{"HUBU_APPROVAL_TTL=5x", `--approval-ttl "5x" is not a positive duration such as 24h`},
	} {
		commandtest.Refuses(t, run, []string{"HUBU_DATABASE_URL=postgres://127.0.0.1:1/hubu", c.env}, []string{"serve"}, c.want)
	}
}

// The secrets may be given as files (X_FILE); X and X_FILE together are refused; and no
// secret reaches an error, the help or the log.
func TestSecretsFromFiles(t *testing.T) {
	t.Parallel()
	urlFile := commandtest.File(t, sqltest.NewDatabase(t, "hubu", hubusql.Migrations())+"\n")
	if out, _, err := runHubu(t, []string{"HUBU_DATABASE_URL_FILE=" + urlFile}, "migrate", "version"); err != nil || out != fmt.Sprintf("version %d\n", latestMigration(t)) {
		t.Fatalf("migrate with HUBU_DATABASE_URL_FILE: %q %v", out, err)
	}
	const password, token = "pw-not-to-show-7d1f", "hubu_service_not-to-show-93ab"
	unreachable := commandtest.File(t, "postgres://hubu:"+password+"@127.0.0.1:1/hubu?connect_timeout=2")
	tokenFile := commandtest.File(t, token+"\n")
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"HUBU_DATABASE_URL=postgres://x/y", "HUBU_DATABASE_URL_FILE=" + urlFile}, []string{"migrate", "version"}, "HUBU_DATABASE_URL and HUBU_DATABASE_URL_FILE are both set: set one"},
		{[]string{"HUBU_DATABASE_URL_FILE=" + urlFile, "HUBU_GONGBU_TOKEN=" + token, "HUBU_GONGBU_TOKEN_FILE=" + tokenFile}, []string{"serve"}, "HUBU_GONGBU_TOKEN and HUBU_GONGBU_TOKEN_FILE are both set: set one"},
		{[]string{"HUBU_DATABASE_URL_FILE=" + missing}, []string{"operator", "create", "--name", "a"}, "HUBU_DATABASE_URL_FILE: open " + missing + ": no such file or directory"},
		{[]string{"HUBU_DATABASE_URL_FILE=" + unreachable, "HUBU_GONGBU_URL=http://127.0.0.1:1", "HUBU_GONGBU_TOKEN_FILE=" + tokenFile}, []string{"serve"}, "cannot reach the database: failed to connect: "},
		{[]string{"HUBU_DATABASE_URL_FILE=" + unreachable, "HUBU_GONGBU_TOKEN_FILE=" + tokenFile}, []string{"serve", "--help"}, "flag: help requested"},
	} {
		commandtest.Refuses(t, run, c.env, c.args, c.want, password, token)
	}

	_, stop := commandtest.Start(t, run, []string{"HUBU_DATABASE_URL_FILE=" + urlFile, "HUBU_GONGBU_URL=http://127.0.0.1:1", "HUBU_GONGBU_TOKEN_FILE=" + tokenFile},
		"serve", "--listen", "127.0.0.1:0")
	stop(token)
}

// latestMigration is the version `migrate up` ends at.
func latestMigration(t *testing.T) uint {
	t.Helper()
	latest, err := migrator.Latest(hubusql.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	return latest
}
