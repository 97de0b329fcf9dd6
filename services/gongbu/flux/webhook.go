package flux

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// The provider's notice that a job has finished rendering (mockflux's `taskReady` callback,
// shaped like the real API's webhook): a JSON body naming the job, signed with a secret the
// adapter sent with the submission. The notice is only a wake-up: Gongbu answers it by
// polling the job, so a forged or replayed notice can cost a poll, never a result.
const (
	webhookTimestampHeader = "X-Mockflux-Timestamp"
	webhookSignatureHeader = "X-Mockflux-Signature"
	// WebhookMaxSkew bounds how far a notice's timestamp may be from Gongbu's clock, and so
	// how long a captured notice can be replayed.
	WebhookMaxSkew = 5 * time.Minute
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

// WebhookJob returns the job a notice names, not yet trusted.
func (a *Adapter) WebhookJob(body []byte) (string, error) {
	var notice struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &notice); err != nil || notice.ID == "" {
		return "", errors.New("the notice is not a JSON object with an id")
	}
	return notice.ID, nil
}

// VerifyWebhook checks a notice's signature against the secret of the decision whose job it
// names, and that it was signed within WebhookMaxSkew of now.
func (a *Adapter) VerifyWebhook(header http.Header, body []byte, decisionID uuid.UUID, now time.Time) error {
	if len(a.webhookKey) == 0 {
		return errors.New("this Gongbu takes no webhooks (no webhook key is configured)")
	}
	stamp := header.Get(webhookTimestampHeader)
	unix, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil {
		return fmt.Errorf("the %s header is not a Unix time", webhookTimestampHeader)
	}
	if skew := now.Sub(time.Unix(unix, 0)).Abs(); skew > WebhookMaxSkew {
		return fmt.Errorf("the notice was signed %s away from this clock (more than %s)", skew.Round(time.Second), WebhookMaxSkew)
	}
	got, ok := strings.CutPrefix(header.Get(webhookSignatureHeader), "sha256=")
	sig, err := hex.DecodeString(got)
	if !ok || err != nil {
		return fmt.Errorf("the %s header is not sha256=<hex>", webhookSignatureHeader)
	}
	mac := hmac.New(sha256.New, []byte(a.webhookSecret(decisionID)))
	mac.Write([]byte(stamp + "."))
	mac.Write(body)
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return errors.New("the notice's signature does not match")
	}
	return nil
}
