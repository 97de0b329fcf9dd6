package decisionsig_test

import (
	"crypto/ed25519"
	"testing"
	"time"

	"hubu.dev/hubu/proto/decisionsig"
)

// BenchmarkSignAndVerify is what a signed decision costs Hubu (Sign) and Gongbu (Verify), to
// set against the question to Hubu it replaces.
func BenchmarkSignAndVerify(b *testing.B) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	keys := func(string) (ed25519.PublicKey, bool) { return pub, true }
	now := time.Now()
	c := claims(now)
	b.Run("sign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decisionsig.Sign(priv, c); err != nil {
				b.Fatal(err)
			}
		}
	})
	h, _ := decisionsig.Sign(priv, c)
	b.Run("verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decisionsig.Verify(h, keys, now); err != nil {
				b.Fatal(err)
			}
		}
	})
}
