package httpserver_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkAuthorize measures new authorizations per second over real HTTP into a real
// Postgres: for one agent (its decisions serialize on its policy row, by design) and for
// eight agents at once.
func BenchmarkAuthorize(b *testing.B) {
	for _, agents := range []int{1, 8} {
		b.Run(fmt.Sprintf("agents=%d", agents), func(b *testing.B) {
			bd := setup(b)
			as := make([]agent, agents)
			for i := range as {
				as[i] = bd.NewAgent(b, fmt.Sprintf("bench-%d", i), policy(50_000, 1_000_000, 1<<60))
			}
			var n atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				a := as[int(n.Add(1))%agents]
				for pb.Next() {
					resp, err := a.Client.AuthorizeWithResponse(context.Background(), newCall("flux-dev").Request())
					if err != nil || resp.JSON201 == nil {
						b.Errorf("authorize: %v", err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "authorizations/s")
		})
	}
}
