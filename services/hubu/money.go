package hubu

import (
	"fmt"
	"strings"
)

// FormatMoney renders micro-units for people, as the console and hubuctl show amounts: at
// least two decimals and as many as the amount needs, so 25000 USD is "USD 0.025" and
// 1000000 is "USD 1.00". Without a currency it is the bare amount, "0.025".
func FormatMoney(micros int64, currency string) string {
	sign := ""
	u := uint64(micros)
	if micros < 0 {
		sign, u = "-", uint64(-(micros+1))+1 // also right for math.MinInt64
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", u%1_000_000), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	s := fmt.Sprintf("%s%d.%s", sign, u/1_000_000, frac)
	if currency == "" {
		return s
	}
	return currency + " " + s
}
