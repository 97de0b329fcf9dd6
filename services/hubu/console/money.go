package console

import (
	"fmt"
	"strings"
)

// money renders integer micro-units as "USD 0.06": at least two decimals, and as many as
// the amount needs (flux-schnell is USD 0.003).
func money(micros int64, currency string) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", micros%1_000_000), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("%s %s%d.%s", currency, sign, micros/1_000_000, frac)
}
