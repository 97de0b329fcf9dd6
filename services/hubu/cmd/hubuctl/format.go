package main

import (
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"hubu.dev/hubu/services/hubu"
)

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// formatAmount is hubu.FormatMoney with the currency made safe for a terminal.
func formatAmount(micros int64, currency string) string {
	if currency != "" {
		currency = clean(currency) + " "
	}
	return currency + hubu.FormatMoney(micros, "")
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return formatTime(*t)
}

// optional is an optional text from the server for a table cell: "-" when absent.
func optional(s *string) string {
	if s == nil || clean(*s) == "" {
		return "-"
	}
	return clean(*s)
}

func formatList(items []string) string {
	if len(items) == 0 {
		return "(none)"
	}
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = clean(s)
	}
	return strings.Join(out, ",")
}

// clean makes text from the server safe for one table cell on a terminal: prompts are
// model-written, so control characters (escape sequences, tabs, newlines) and invisible
// format characters (bidirectional overrides) become spaces, and runs of space collapse.
func clean(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) {
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return strings.TrimRight(b.String(), " ")
}

// truncate shortens s to at most n runes, marking the cut with an ellipsis.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
