package migrator

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// Command is the `<binary> migrate up|down|version` command every service binary has: the
// database URL from --database-url or the envVar fallback, and `down` rolling back --steps
// (1 by default, 0 for all). It prints the version it leaves the database at.
func Command(binary, envVar string, migrations fs.FS, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	usage := "usage: " + binary + " migrate up|down|version --database-url URL [--steps N]"
	if len(args) == 0 {
		return errors.New(usage)
	}
	action := args[0]
	if action == "-h" || action == "--help" {
		fmt.Fprintln(stdout, usage)
		return nil
	}
	flags := flag.NewFlagSet(binary+" migrate "+action, flag.ContinueOnError)
	flags.SetOutput(stderr)
	dbURL := flags.String("database-url", getenv(envVar), "PostgreSQL URL (env "+envVar+")")
	steps := flags.Int("steps", 1, "with down: how many migrations to roll back (0 for all)")
	if err := flags.Parse(args[1:]); err != nil {
		return err
	}
	if err := CheckURL(*dbURL, envVar); err != nil {
		return err
	}
	switch action {
	case "up":
		if err := Up(*dbURL, migrations); err != nil {
			return err
		}
	case "down":
		if *steps < 0 {
			return errors.New("--steps must not be negative")
		}
		if err := Down(*dbURL, migrations, *steps); err != nil {
			return err
		}
	case "version":
	default:
		return fmt.Errorf("unknown migrate action %q: use up, down or version", action)
	}
	st, err := Version(*dbURL, migrations)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "version %d%s\n", st.Version, map[bool]string{true: " (dirty)"}[st.Dirty])
	return nil
}

// CheckURL refuses a missing or non-postgres database URL with one line naming the setting.
func CheckURL(databaseURL, envVar string) error {
	if databaseURL == "" {
		return fmt.Errorf("--database-url (or %s) is required", envVar)
	}
	if !strings.HasPrefix(databaseURL, "postgres://") && !strings.HasPrefix(databaseURL, "postgresql://") {
		return errors.New("--database-url must be a postgres:// URL")
	}
	return nil
}

// RequireLatest fails unless the database is at the latest migration version: a binary
// never serves on a schema it was not built for.
func RequireLatest(binary, databaseURL string, migrations fs.FS) error {
	st, err := Version(databaseURL, migrations)
	if err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	latest, err := Latest(migrations)
	if err != nil {
		return err
	}
	if st.Dirty || st.Version != latest {
		return fmt.Errorf("the database schema is at version %d (dirty=%v), this %s needs %d: run `%s migrate up`", st.Version, st.Dirty, binary, latest, binary)
	}
	return nil
}
