// Package policy decides what happens to a priced operation under an agent's policy. It is
// pure: the caller supplies the budget already used, under a lock that keeps it true.
package policy

import (
	"fmt"
	"slices"
	"time"

	"hubu.dev/hubu/services/hubu"
)

// Action is what the policy does with a new operation.
type Action int

const (
	Approve Action = iota // within the auto-approve limit: execute now
	Hold                  // above the auto-approve limit: hold the budget and wait for a human
	Deny                  // refused; nothing is held
)

// Verdict is an Action, with the denial when it is Deny.
type Verdict struct {
	Action Action
	Denial *hubu.Denial
}

// Decide applies p to an operation of amount in currency for scope, given usedMicros of the
// current budget period. The checks run from the hardest refusal to the softest.
func Decide(p hubu.Policy, scope hubu.Scope, amount int64, currency string, usedMicros int64) Verdict {
	deny := func(code, format string, args ...any) Verdict {
		return Verdict{Action: Deny, Denial: &hubu.Denial{Code: code, Message: fmt.Sprintf(format, args...)}}
	}
	switch {
	case currency != p.Currency:
		return deny(hubu.DenialDenied, "the price is in %s but the agent's budget is in %s", currency, p.Currency)
	case !allowed(p.AllowedProviders, scope.Provider):
		return deny(hubu.DenialDenied, "provider %s is not allowed for this agent", scope.Provider)
	case !allowed(p.AllowedModels, scope.Model):
		return deny(hubu.DenialDenied, "model %s is not allowed for this agent", scope.Model)
	case amount > p.PerOperationCeilingMicros:
		return deny(hubu.DenialDenied, "%s is above the agent's per-operation ceiling of %s",
			hubu.FormatMoney(amount, currency), hubu.FormatMoney(p.PerOperationCeilingMicros, currency))
	case amount > p.BudgetMicros-usedMicros:
		return deny(hubu.DenialBudgetExceeded, "%s would exceed the agent's %s budget of %s (%s left)",
			hubu.FormatMoney(amount, currency), p.BudgetPeriod, hubu.FormatMoney(p.BudgetMicros, currency),
			hubu.FormatMoney(max(p.BudgetMicros-usedMicros, 0), currency))
	case amount > p.AutoApproveLimitMicros:
		return Verdict{Action: Hold}
	}
	return Verdict{Action: Approve}
}

func allowed(list []string, name string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, name)
}

// PeriodStart is the start of the calendar budget period that contains now, in UTC.
// Weeks start on Monday.
func PeriodStart(period string, now time.Time) (time.Time, error) {
	now = now.UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	switch period {
	case "day":
		return day, nil
	case "week":
		offset := (int(day.Weekday()) + 6) % 7 // days since Monday
		return day.AddDate(0, 0, -offset), nil
	case "month":
		return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC), nil
	}
	return time.Time{}, fmt.Errorf("unknown budget period %q", period)
}

// PeriodEnd is the end (exclusive) of the budget period that starts at start.
func PeriodEnd(period string, start time.Time) time.Time {
	switch period {
	case "week":
		return start.AddDate(0, 0, 7)
	case "month":
		return start.AddDate(0, 1, 0)
	}
	return start.AddDate(0, 0, 1)
}
