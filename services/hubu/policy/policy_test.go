package policy

import (
	"testing"
	"time"

	"hubu.dev/hubu/services/hubu"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	p := hubu.DefaultPolicy() // auto 0.05, ceiling 1.00, budget 5.00
	scope := hubu.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x1024"}
	cases := []struct {
		name   string
		policy func(*hubu.Policy)
		amount int64
		used   int64
		want   Action
		code   string
	}{
		{"within auto-approve", nil, 25_000, 0, Approve, ""},
		{"exactly the auto-approve limit", nil, 50_000, 0, Approve, ""},
		{"above auto-approve", nil, 60_000, 0, Hold, ""},
		{"above ceiling", nil, 1_000_001, 0, Deny, hubu.DenialDenied},
		{"budget exactly used up", nil, 50_000, 4_950_000, Approve, ""},
		{"budget exceeded", nil, 50_000, 4_950_001, Deny, hubu.DenialBudgetExceeded},
		{"model not allowed", func(p *hubu.Policy) { p.AllowedModels = []string{"flux-schnell"} }, 25_000, 0, Deny, hubu.DenialDenied},
		{"no models allowed", func(p *hubu.Policy) { p.AllowedModels = nil }, 25_000, 0, Deny, hubu.DenialDenied},
		{"provider not allowed", func(p *hubu.Policy) { p.AllowedProviders = []string{"other"} }, 25_000, 0, Deny, hubu.DenialDenied},
		{"currency mismatch", func(p *hubu.Policy) { p.Currency = "EUR" }, 25_000, 0, Deny, hubu.DenialDenied},
		{"held spend still counts against budget", nil, 60_000, 4_990_000, Deny, hubu.DenialBudgetExceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pol := p
			if c.policy != nil {
				c.policy(&pol)
			}
			v := Decide(pol, scope, c.amount, "USD", c.used)
			if v.Action != c.want {
				t.Fatalf("action = %v, want %v (%+v)", v.Action, c.want, v.Denial)
			}
			if c.code != "" && (v.Denial == nil || v.Denial.Code != c.code) {
				t.Fatalf("denial = %+v, want code %s", v.Denial, c.code)
			}
		})
	}
}

func TestPeriodStart(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 15, 4, 5, 0, time.FixedZone("X", 9*3600)) // Thu 06:04 UTC
	for period, want := range map[string]struct{ start, end time.Time }{
		"day":   {time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)},
		"week":  {time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)},
		"month": {time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
	} {
		start, err := PeriodStart(period, now)
		if err != nil || !start.Equal(want.start) {
			t.Errorf("PeriodStart(%s) = %v, %v; want %v", period, start, err, want.start)
		}
		if got := PeriodEnd(period, start); !got.Equal(want.end) {
			t.Errorf("PeriodEnd(%s) = %v, want %v", period, got, want.end)
		}
	}
	if _, err := PeriodStart("year", now); err == nil {
		t.Error("unknown period accepted")
	}
}
