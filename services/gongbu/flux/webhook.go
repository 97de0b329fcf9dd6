package flux

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"
)

// The provider's notice that a job has ended, as BFL sends it: a JSON body naming the job, with
// the secret the adapter sent with the submission, in X-Webhook-Secret (BFL's documentation)
// and as the HMAC-SHA256 of the body in X-BFL-Signature (BFL's skills). The notice is only a
// wake-up: Gongbu answers it by polling the job, so a forged or replayed notice (neither header
// carries a time) can cost a poll, never a result.
const (
	webhookSecretHeader    = "X-Webhook-Secret"
	webhookSignatureHeader = "X-BFL-Signature"
)

// webhookSecret is the secret the adapter sends with a decision's submission: derived from
// the deployment's webhook key and the decision id, so every replica derives the same one, a
// resubmission under the same idempotency key sends the same body, and the secret of one job
// says nothing of another's.
func (a *Adapter) webhookSecret(decisionID uuid.UUID) string {
	mac := hmac.New(sha256.New, a.webhookKey)
	mac.Write([]byte("gongbu/flux-webhook/v1\x00"))
	mac.Write([]byte(decisionID.String()))
	return hex.EncodeToString(mac.Sum(nil))
}

// WebhookJob returns the job a notice names, not yet trusted: its id (BFL's "id", or the
// "task_id" of its earlier notices).
func (a *Adapter) WebhookJob(body []byte) (string, error) {
	var notice struct {
		ID     string `json:"id"`
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(body, &notice); err != nil || cmp.Or(notice.ID, notice.TaskID) == "" {
		return "", errors.New("the notice is not a JSON object with an id")
	}
	return cmp.Or(notice.ID, notice.TaskID), nil
}

// VerifyWebhook checks that a notice carries the secret of the decision whose job it names: as
// the HMAC of the body where X-BFL-Signature is present (then it must match), else in
// X-Webhook-Secret; each compared in constant time.
func (a *Adapter) VerifyWebhook(header http.Header, body []byte, decisionID uuid.UUID) error {
	if len(a.webhookKey) == 0 {
		return errors.New("this Gongbu takes no webhooks (no webhook key is configured)")
	}
	secret := []byte(a.webhookSecret(decisionID))
	if sigHeader := header.Get(webhookSignatureHeader); sigHeader != "" {
		got, ok := strings.CutPrefix(sigHeader, "sha256=")
		sig, err := hex.DecodeString(got)
		if !ok || err != nil {
			return fmt.Errorf("the %s header is not sha256=<hex>", webhookSignatureHeader)
		}
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		if !hmac.Equal(sig, mac.Sum(nil)) {
			return errors.New("the notice's signature does not match")
		}
		return nil
	}
	given := header.Get(webhookSecretHeader)
	if given == "" {
		return fmt.Errorf("the notice carries neither %s nor %s", webhookSignatureHeader, webhookSecretHeader)
	}
	if subtle.ConstantTimeCompare([]byte(given), secret) != 1 {
		return errors.New("the notice's secret does not match")
	}
	return nil
}
