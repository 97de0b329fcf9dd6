package httpserver_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/hubutest"
)

// sizedImages says the sides of the images it was told of, and counts the questions.
type sizedImages struct {
	mu    sync.Mutex
	sizes map[uuid.UUID]contract.Dimensions
	asked int
}

func (s *sizedImages) Image(context.Context, string, bool) (hubu.KeptImage, error) {
	return hubu.KeptImage{}, hubu.Errorf(hubu.CodeNotFound, "not here")
}

func (s *sizedImages) ImageSize(_ context.Context, id uuid.UUID) (contract.Dimensions, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked++
	d, ok := s.sizes[id]
	if !ok {
		return contract.Dimensions{}, hubu.Errorf(hubu.CodeNotFound, "no image")
	}
	return d, nil
}

// An edit is priced from its inputs as BFL prices it: the output's megapixels (the first
// input's size, when the edit names none) and each input's. Its inputs must be the same agent's
// succeeded results whose images the executor keeps; a redelivery is replayed as recorded,
// without asking the executor again.
func TestEditImage(t *testing.T) {
	t.Parallel()
	images := &sizedImages{sizes: map[uuid.UUID]contract.Dimensions{}}
	e := hubutest.New(t, &hubutest.Options{Images: images})
	service := e.Client(t, e.ServiceToken)
	a, other := e.NewAgent(t, "agent", nil), e.NewAgent(t, "other", nil)
	ctx := context.Background()
	result := func(ag agent, size contract.Dimensions) string {
		t.Helper()
		op := mustOperation(t, authorize(t, ag, newCall("flux-2-klein-4b")))
		settled, err := service.SettleDecisionWithResponse(ctx, *op.DecisionId, hubuapi.SettleRequest{AmountMicros: op.AmountMicros})
		if err != nil || settled.JSON200 == nil || settled.JSON200.State != hubuapi.OperationStateSucceeded {
			t.Fatalf("settle: %v", err)
		}
		images.mu.Lock()
		images.sizes[*op.DecisionId] = size
		images.mu.Unlock()
		return op.PublicHandle
	}
	wide := result(a, contract.Dimensions{Width: 2048, Height: 1024})
	square := result(a, contract.Dimensions{Width: 1024, Height: 1024})

	// FLUX.2 [klein] 4B: 1.4 credits the first megapixel, 0.1 each further one and each input one.
	edit := hubutest.NewEdit("flux-2-klein-4b", wide, square)
	op := mustOperation(t, authorize(t, a, edit))
	if op.State != hubuapi.OperationStateExecuting && op.State != hubuapi.OperationStateDispatching {
		t.Fatalf("the edit: %+v", op)
	}
	// Output 2048x1024 (2 MP): 14000 + 1000; inputs 2 MP + 1 MP: 3000.
	if op.AmountMicros != 18_000 || op.Scope.Size != "2048x1024" {
		t.Fatalf("the edit is priced %d for %s, want 18000 for 2048x1024", op.AmountMicros, op.Scope.Size)
	}
	images.mu.Lock()
	asked := images.asked
	images.mu.Unlock()
	if again := mustOperation(t, authorize(t, a, edit)); again.PublicHandle != op.PublicHandle || again.AmountMicros != op.AmountMicros {
		t.Fatalf("the redelivery: %+v", again)
	}
	images.mu.Lock()
	if images.asked != asked {
		t.Fatalf("the redelivery asked the executor for sizes again (%d→%d)", asked, images.asked)
	}
	images.mu.Unlock()

	unsettled := mustOperation(t, authorize(t, a, newCall("flux-2-klein-4b"))).PublicHandle // executing, never settled
	unkept := mustOperation(t, authorize(t, a, newCall("flux-2-klein-4b")))
	if r, err := service.SettleDecisionWithResponse(ctx, *unkept.DecisionId, hubuapi.SettleRequest{AmountMicros: unkept.AmountMicros}); err != nil || r.JSON200 == nil {
		t.Fatal(err)
	}
	theirs := result(other, contract.Dimensions{Width: 1024, Height: 1024})
	for _, c := range []struct {
		name string
		call hubutest.Call
		who  agent
		want string
	}{
		{"another agent's result", hubutest.NewEdit("flux-2-klein-4b", theirs), a, "is no operation of yours"},
		{"a result not finished", hubutest.NewEdit("flux-2-klein-4b", unsettled), a, "has not succeeded"},
		{"a result whose image is not kept", hubutest.NewEdit("flux-2-klein-4b", unkept.PublicHandle), a, "is not kept"},
		{"a model that does not edit", hubutest.NewEdit("flux-dev", wide), a, "flux-dev"},
		{"too many inputs for the model", hubutest.NewEdit("flux-2-klein-4b", wide, square, theirs, unsettled, unkept.PublicHandle), a, "1 to 4 earlier results"},
	} {
		resp := authorize(t, c.who, c.call)
		if resp.StatusCode() != http.StatusBadRequest || problemCode(t, resp.Body) != "invalid_arguments" || !contains(resp.Body, c.want) {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode(), resp.Body)
		}
	}
	gen := newCall("flux-2-klein-4b")
	gen.Args.InputImages = []string{wide}
	if resp := authorize(t, a, gen); resp.StatusCode() != http.StatusBadRequest || !contains(resp.Body, "input_images are edit_image's") {
		t.Errorf("generate_image with input images: %d %s", resp.StatusCode(), resp.Body)
	}
}

func contains(body []byte, s string) bool { return strings.Contains(string(body), s) }
