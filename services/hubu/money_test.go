package hubu_test

import (
	"math"
	"testing"

	"hubu.dev/hubu/services/hubu"
)

// More cases, through hubuctl's formatAmount, are in cmd/hubuctl's TestFormatAmount.
func TestFormatMoney(t *testing.T) {
	t.Parallel()
	for micros, want := range map[int64]string{
		3_000: "USD 0.003", 25_000: "USD 0.025", 60_000: "USD 0.06", 3: "USD 0.000003", 1_000_000: "USD 1.00", -60_000: "USD -0.06", math.MinInt64: "USD -9223372036854.775808",
	} {
		if got := hubu.FormatMoney(micros, "USD"); got != want {
			t.Errorf("FormatMoney(%d, USD) = %q, want %q", micros, got, want)
		}
	}
	if got := hubu.FormatMoney(40_000, ""); got != "0.04" {
		t.Errorf("without a currency: %q", got)
	}
}
