package migrator

import "testing"

func TestPgx5URL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u@h:5432/db":                                      "pgx5://u@h:5432/db",
		"postgresql://u:pw@h/db?sslmode=disable":                      "pgx5://u:pw@h/db?sslmode=disable",
		"postgres://u@h/db?sslmode=disable&pool_max_conns=9":          "pgx5://u@h/db?sslmode=disable",
		"postgres://u@h/db?pool_max_conns=9&pool_min_conns=1&x-foo=1": "pgx5://u@h/db?x-foo=1",
	} {
		if got, err := pgx5URL(in); err != nil || got != want {
			t.Errorf("pgx5URL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"mysql://u@h/db", "postgres://u@h/db?%zz"} {
		if _, err := pgx5URL(bad); err == nil {
			t.Errorf("pgx5URL(%q) was accepted", bad)
		}
	}
}
