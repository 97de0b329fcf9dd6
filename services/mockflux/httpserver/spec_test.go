package httpserver_test

import (
	"context"
	"testing"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/mockflux"
	"hubu.dev/hubu/services/mockflux/fault"
)

// The spec is valid OpenAPI, and the limits mockflux enforces are the ones it publishes (the
// image limits, proto/contract's, are checked there).
func TestSpecMatchesTheServer(t *testing.T) {
	t.Parallel()
	doc, err := bflapi.GetSpec()
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
}
