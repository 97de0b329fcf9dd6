package loadtest

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
)

// Millis is a duration that JSON shows in milliseconds (a float), which is how the report's
// readers compare figures.
type Millis time.Duration

func (m Millis) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(m)/float64(time.Millisecond), 'f', 3, 64), nil
}

func (m Millis) String() string { return formatDuration(time.Duration(m)) }

// Dist is a distribution of latencies: its size, its percentiles, and every sample, in the
// order they were taken (the JSON report keeps them all, so any other figure can be computed
// later).
type Dist struct {
	N       int      `json:"n"`
	Min     Millis   `json:"min_ms"`
	P50     Millis   `json:"p50_ms"`
	P95     Millis   `json:"p95_ms"`
	P99     Millis   `json:"p99_ms"`
	Max     Millis   `json:"max_ms"`
	Mean    Millis   `json:"mean_ms"`
	Samples []Millis `json:"samples_ms"`
}

// NewDist summarizes samples. Percentiles are nearest-rank: always one of the samples, so a
// p99 of 200 samples is the second largest, not an interpolation between two.
func NewDist(samples []time.Duration) Dist {
	d := Dist{N: len(samples), Samples: make([]Millis, len(samples))}
	if len(samples) == 0 {
		return d
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	var sum time.Duration
	for i, s := range samples {
		d.Samples[i] = Millis(s)
		sum += s
	}
	rank := func(p float64) Millis {
		i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
		return Millis(sorted[max(0, min(i, len(sorted)-1))])
	}
	d.Min, d.Max = Millis(sorted[0]), Millis(sorted[len(sorted)-1])
	d.P50, d.P95, d.P99 = rank(50), rank(95), rank(99)
	d.Mean = Millis(sum / time.Duration(len(samples)))
	return d
}

// Ratio is a ratio of two figures taken in the same run; JSON shows it as a number, or null
// when the reference is missing or zero.
type Ratio struct {
	Value float64
	Valid bool
}

// ratio is num ÷ den, invalid when den is not positive.
func ratio(num, den float64) Ratio {
	if den <= 0 {
		return Ratio{}
	}
	return Ratio{Value: num / den, Valid: true}
}

func (r Ratio) MarshalJSON() ([]byte, error) {
	if !r.Valid {
		return []byte("null"), nil
	}
	return json.Marshal(math.Round(r.Value*1000) / 1000)
}

func (r Ratio) String() string {
	if !r.Valid {
		return "n/a"
	}
	return strconv.FormatFloat(r.Value, 'f', 2, 64) + "×"
}

// formatDuration prints a latency with three significant digits in the unit that suits it.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 0, 64) + "µs"
	case d < 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
	}
}
