package httpserver_test

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/hubutest"
)

// fakeImages keeps one image and its preview for every operation, and records what was asked.
type fakeImages struct {
	mu    sync.Mutex
	asked []string
}

var (
	keptPNG     = []byte("\x89PNG\r\n\x1a\n stand-in")
	keptPreview = []byte("\xff\xd8\xff stand-in")
)

func (f *fakeImages) Image(_ context.Context, handle string, preview bool) (hubu.KeptImage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if preview {
		f.asked = append(f.asked, handle+" preview")
		return hubu.KeptImage{MIMEType: "image/jpeg", Bytes: keptPreview, ETag: `"p"`}, nil
	}
	f.asked = append(f.asked, handle)
	return hubu.KeptImage{MIMEType: "image/png", Bytes: keptPNG, ETag: `"o"`}, nil
}

// An operation's image is served from the executor to whoever may read the operation: its
// agent and an operator; another agent gets not_found and the executor is not asked.
func TestOperationImage(t *testing.T) {
	t.Parallel()
	images := &fakeImages{}
	e := hubutest.New(t, &hubutest.Options{Images: images})
	a, other := e.NewAgent(t, "agent", nil), e.NewAgent(t, "other", nil)
	op := mustOperation(t, authorize(t, a, newCall("flux-dev")))
	ctx := context.Background()
	yes := true

	got, err := a.Client.GetOperationImageWithResponse(ctx, op.PublicHandle, nil)
	if err != nil || got.StatusCode() != http.StatusOK || !bytes.Equal(got.Body, keptPNG) ||
		got.HTTPResponse.Header.Get("Content-Type") != "image/png" || got.HTTPResponse.Header.Get("ETag") != `"o"` {
		t.Fatalf("the agent's own image: %v %d %v", err, got.StatusCode(), got.HTTPResponse.Header)
	}
	pv, err := e.Operator.GetOperationImageWithResponse(ctx, op.PublicHandle, &hubuapi.GetOperationImageParams{Preview: &yes})
	if err != nil || pv.StatusCode() != http.StatusOK || !bytes.Equal(pv.Body, keptPreview) || pv.HTTPResponse.Header.Get("Content-Type") != "image/jpeg" {
		t.Fatalf("an operator's preview: %v %d", err, pv.StatusCode())
	}
	no, err := other.Client.GetOperationImageWithResponse(ctx, op.PublicHandle, nil)
	if err != nil || no.StatusCode() != http.StatusNotFound || problemCode(t, no.Body) != "not_found" {
		t.Fatalf("another agent: %v %d %s", err, no.StatusCode(), no.Body)
	}
	images.mu.Lock()
	asked := images.asked
	images.mu.Unlock()
	if len(asked) != 2 || asked[0] != op.PublicHandle || asked[1] != op.PublicHandle+" preview" {
		t.Fatalf("the executor was asked %q", asked)
	}

	// A Hubu without an executor says so.
	bare := setup(t)
	b := bare.NewAgent(t, "agent", nil)
	op = mustOperation(t, authorize(t, b, newCall("flux-dev")))
	if r, err := b.Client.GetOperationImageWithResponse(ctx, op.PublicHandle, nil); err != nil || r.StatusCode() != http.StatusServiceUnavailable ||
		problemCode(t, r.Body) != "unavailable" {
		t.Fatalf("no executor: %v %d %s", err, r.StatusCode(), r.Body)
	}
}

func (f *fakeImages) ImageSize(context.Context, uuid.UUID) (contract.Dimensions, error) {
	return contract.Dimensions{}, hubu.Errorf(hubu.CodeNotFound, "no sizes here")
}
