package httpserver_test

import (
	"context"
	"testing"

	"hubu.dev/hubu/proto/bflspec"
	"hubu.dev/hubu/services/mockflux"
	"hubu.dev/hubu/services/mockflux/fault"
	"hubu.dev/hubu/services/mockflux/webhook"
)

// The spec is valid OpenAPI, and the limits mockflux enforces are the ones it publishes (the
// image limits, proto/contract's, are checked there).
func TestSpecMatchesTheServer(t *testing.T) {
	t.Parallel()
	doc, err := bflspec.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the spec is not valid OpenAPI: %v", err)
	}
	key := doc.Paths.Find("/v1/{model}").Post.Parameters.GetByInAndName("header", "Idempotency-Key").Schema.Value
	if key.MaxLength == nil || *key.MaxLength != mockflux.MaxIdempotencyKey {
		t.Errorf("Idempotency-Key maxLength %v", key.MaxLength)
	}
	delay := doc.Components.Schemas["FaultRequest"].Value.Properties["delay_ms"].Value
	if *delay.Max != float64(fault.MaxDelay.Milliseconds()) {
		t.Errorf("delay_ms maximum %v", *delay.Max)
	}
	flux := doc.Components.Schemas["FluxRequest"].Value.Properties
	if u := flux["webhook_url"].Value; u.MaxLength == nil || *u.MaxLength != mockflux.MaxWebhookURL {
		t.Errorf("webhook_url maxLength %v", u.MaxLength)
	}
	if s := flux["webhook_secret"].Value; s.MinLength != mockflux.MinWebhookSecret || s.MaxLength == nil || *s.MaxLength != mockflux.MaxWebhookSecret {
		t.Errorf("webhook_secret length %d..%v", s.MinLength, s.MaxLength)
	}
	// The callback names the headers webhook sends.
	callback := doc.Paths.Find("/v1/{model}").Post.Callbacks["taskReady"].Value.Value("{$request.body#/webhook_url}")
	if callback == nil || callback.Post == nil {
		t.Fatal("the submit operation has no taskReady callback")
	}
	for _, h := range []string{webhook.SecretHeader, webhook.SignatureHeader} {
		if p := callback.Post.Parameters.GetByInAndName("header", h); p == nil || !p.Required {
			t.Errorf("the callback does not require header %s", h)
		}
	}
}
