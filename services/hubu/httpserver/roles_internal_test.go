package httpserver

import (
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// routeRoles names exactly the /v1 routes the router serves: a route missing there would
// refuse every caller, and an entry for no route would be a typo.
func TestRouteRolesCoverEveryRoute(t *testing.T) {
	t.Parallel()
	served := map[string]bool{}
	walk := func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if strings.HasPrefix(route, "/v1/") {
			served[method+" "+route] = true
		}
		return nil
	}
	if err := chi.Walk((&Server{}).Handler(prometheus.NewRegistry()).(chi.Routes), walk); err != nil {
		t.Fatal(err)
	}
	for route := range served {
		if len(routeRoles[route]) == 0 {
			t.Errorf("%s has no roles in routeRoles", route)
		}
	}
	for route := range routeRoles {
		if !served[route] {
			t.Errorf("routeRoles names %s, which the router does not serve", route)
		}
	}
	if len(served) == 0 {
		t.Fatal("no /v1 routes found")
	}
}
