package main

import (
	"testing"
)

func TestFormatAmount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		micros   int64
		currency string
		want     string
	}{
		{25_000, "USD", "USD 0.025"},
		{50_000, "USD", "USD 0.05"},
		{1_000_000, "USD", "USD 1.00"},
		{5_000_000, "USD", "USD 5.00"},
		{0, "USD", "USD 0.00"},
		{1, "USD", "USD 0.000001"},
		{1_234_567_890, "EUR", "EUR 1234.56789"},
		{-60_000, "USD", "USD -0.06"},
		{-9223372036854775808, "USD", "USD -9223372036854.775808"},
		{40_000, "", "0.04"},
	} {
		if got := formatAmount(tc.micros, tc.currency); got != tc.want {
			t.Errorf("formatAmount(%d, %q) = %q, want %q", tc.micros, tc.currency, got, tc.want)
		}
	}
}

func TestCleanAndTruncate(t *testing.T) {
	t.Parallel()
	if got := clean("  a\tcat\n\x1b[31mred\x1b[0m \u202eevil  "); got != "a cat [31mred [0m evil" {
		t.Errorf("clean = %q", got)
	}
	if got := truncate("0123456789", 10); got != "0123456789" {
		t.Errorf("truncate kept = %q", got)
	}
	if got := truncate("ééééééééééé", 10); got != "ééééééééé…" {
		t.Errorf("truncate cut = %q", got)
	}
}
