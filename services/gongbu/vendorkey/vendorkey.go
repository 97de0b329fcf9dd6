// Package vendorkey derives the idempotency key Gongbu sends a provider for a decision.
package vendorkey

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/google/uuid"
)

// For derives the key from the provider and the decision id alone, so it is the same however
// often and by whichever Gongbu process the decision is submitted, even after Gongbu lost its
// own record, and it reveals nothing about the decision id.
func For(provider string, decisionID uuid.UUID) string {
	sum := sha256.Sum256([]byte("gongbu/vendor-key/v1\x00" + provider + "\x00" + decisionID.String()))
	return hex.EncodeToString(sum[:])
}
