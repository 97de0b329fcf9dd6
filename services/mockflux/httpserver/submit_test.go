package httpserver_test

import (
	"bytes"
	"context"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"

	"hubu.dev/hubu/proto/bflapi"
	"hubu.dev/hubu/services/mockflux/render"
)

// The happy path in the real API's shape: submit, poll Pending then Ready, fetch the PNG.
func TestSubmitPollAndSample(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sub := b.submitOK(t, "flux-dev", "", strings.Replace(fox, `}`, `,"output_format":"png"}`, 1))
	// Like the real API's, the polling URL is on another host than the submit's (here the
	// same server under its other name), and the answer states the cost.
	regional := strings.Replace(b.url, "127.0.0.1", "localhost", 1)
	if sub.Id == "" || sub.PollingUrl != regional+"/v1/get_result?id="+url.QueryEscape(sub.Id) ||
		sub.Cost == nil || *sub.Cost != 2.5 || sub.OutputMp == nil || *sub.OutputMp != 0.75 || sub.InputMp == nil || *sub.InputMp != 0 {
		t.Fatalf("submit answered %+v", sub)
	}
	b.requireCharges(t, 1, 25_000)

	// The polling URL works as handed out (with the key, like the real API).
	status, _, body := b.get(t, sub.PollingUrl, http.Header{"X-Key": {testKey}})
	if status != http.StatusOK || !strings.Contains(string(body), `"status":"Pending"`) {
		t.Fatalf("first poll: %d %s", status, body)
	}
	res := b.pollUntilReady(t, sub.Id, 1)
	if *res.Prompt != "a red fox in the snow" || *res.Seed != 42 || *res.Duration != *res.EndTime-*res.StartTime {
		t.Fatalf("result %+v", res)
	}
	if !strings.HasPrefix(res.Sample, regional+"/samples/"+sub.Id+".png?exp=") {
		t.Fatalf("sample URL %s", res.Sample)
	}
	again := b.poll(t, sub.Id) // polling a Ready job again answers the same URL
	if again.Status != bflapi.ResultStatusReady || again.Result.Sample != res.Sample {
		t.Fatalf("second Ready poll: %+v", again)
	}

	status, header, img := b.get(t, res.Sample, nil)
	if status != http.StatusOK || header.Get("Content-Type") != "image/png" {
		t.Fatalf("sample: %d %s", status, header.Get("Content-Type"))
	}
	decoded, err := png.Decode(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	if s := decoded.Bounds(); s.Dx() != 1024/render.Scale || s.Dy() != 768/render.Scale {
		t.Fatalf("image size %v", s)
	}

	// The same prompt and seed in another job give the same bytes; another seed does not.
	png := strings.Replace(fox, `}`, `,"output_format":"png"}`, 1)
	same := b.pollUntilReady(t, b.submitOK(t, "flux-dev", "", png).Id, 2)
	other := b.pollUntilReady(t, b.submitOK(t, "flux-dev", "", strings.Replace(png, "42", "43", 1)).Id, 2)
	_, _, sameImg := b.get(t, same.Sample, nil)
	_, _, otherImg := b.get(t, other.Sample, nil)
	if !bytes.Equal(img, sameImg) {
		t.Fatal("the same prompt and seed gave a different PNG")
	}
	if bytes.Equal(img, otherImg) {
		t.Fatal("another seed gave the same PNG")
	}
	b.requireCharges(t, 3, 75_000)
	if b.validator.Validated() == 0 {
		t.Fatal("no response was validated against the spec")
	}
}

func TestJPEGAndUltraWithoutSize(t *testing.T) {
	t.Parallel()
	b := setupWith(t, config{pendingPolls: 0})
	sub := b.submitOK(t, "flux-pro-1.1-ultra", "", `{"prompt":"a lighthouse","aspect_ratio":"16:9","output_format":"jpeg"}`)
	res := b.pollUntilReady(t, sub.Id, 1)
	if !strings.Contains(res.Sample, "/samples/"+sub.Id+".jpeg?") {
		t.Fatalf("sample %s", res.Sample)
	}
	status, header, img := b.get(t, res.Sample, nil)
	if status != http.StatusOK || header.Get("Content-Type") != "image/jpeg" {
		t.Fatalf("sample: %d %s", status, header.Get("Content-Type"))
	}
	decoded, err := jpeg.Decode(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	// Ultra at 16:9 makes about 4 MP: 2720x1536, drawn a Scale smaller.
	if s := decoded.Bounds(); s.Dx() != 2720/render.Scale || s.Dy() != 1536/render.Scale {
		t.Fatalf("size %v", s)
	}
	b.requireCharges(t, 1, 60_000)
}

func TestPendingPolls(t *testing.T) {
	t.Parallel()
	b := setupWith(t, config{pendingPolls: 2})
	sub := b.submitOK(t, "flux-dev", "", fox)
	for i, want := range []float64{0, 0.5} {
		r := b.poll(t, sub.Id)
		if r.Status != bflapi.ResultStatusPending || r.Progress == nil || *r.Progress != want || r.Result != nil {
			t.Fatalf("poll %d: %+v", i+1, r)
		}
	}
	if r := b.poll(t, sub.Id); r.Status != bflapi.ResultStatusReady {
		t.Fatalf("third poll: %+v", r)
	}
}

func TestUnknownTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if r := b.poll(t, "no-such-task"); r.Status != bflapi.ResultStatusTaskNotFound || r.Id != "no-such-task" {
		t.Fatalf("%+v", r)
	}
	status, _, body := b.get(t, b.url+"/v1/get_result", http.Header{"X-Key": {testKey}})
	if status != http.StatusUnprocessableEntity || !strings.Contains(detail(t, body), "id: field required") {
		t.Fatalf("without id: %d %s", status, body)
	}
}

// Same key and body: the same task and no new charge. Same key and anything else: 422 and
// no charge. No key: every submit is a new task.
func TestIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.submitOK(t, "flux-pro-1.1", "decision-1", fox)
	second := b.submitOK(t, "flux-pro-1.1", "decision-1", `{"seed":42.0,"height":768,"width":1024,"prompt":"a red fox in the snow"}`)
	if !reflect.DeepEqual(second, first) {
		t.Fatalf("replay answered %+v, want %+v", second, first)
	}
	b.requireCharges(t, 1, 40_000)

	for _, c := range []struct{ model, body string }{
		{"flux-pro-1.1", strings.Replace(fox, "42", "43", 1)},
		{"flux-pro-1.1", `{"prompt":"a red fox in the snow","width":1024,"height":768,"seed":42,"prompt_upsampling":true}`},
		{"flux-dev", fox},
	} {
		resp := b.submitRaw(t, c.model, "decision-1", c.body)
		if resp.StatusCode() != http.StatusUnprocessableEntity || resp.JSON422 == nil ||
			!strings.Contains(resp.JSON422.Detail, "already used for another request") {
			t.Fatalf("%s %s: %d %s", c.model, c.body, resp.StatusCode(), resp.Body)
		}
	}
	b.requireCharges(t, 1, 40_000)

	// The charge names the key it was made under, for reconciliation.
	c := b.charges(t).Charges[0]
	if c.JobId != first.Id || c.Model != "flux-pro-1.1" || c.AmountMicros != 40_000 || c.IdempotencyKey == nil || *c.IdempotencyKey != "decision-1" {
		t.Fatalf("charge %+v", c)
	}

	a, bb := b.submitOK(t, "flux-pro-1.1", "", fox), b.submitOK(t, "flux-pro-1.1", "", fox)
	if a.Id == bb.Id {
		t.Fatal("two submits without a key got one task")
	}
	b.requireCharges(t, 3, 120_000)
	if b.charges(t).Charges[2].IdempotencyKey != nil {
		t.Fatal("a charge without a key names one")
	}

	long := strings.Repeat("k", 256)
	if resp := b.submitRaw(t, "flux-pro-1.1", long, fox); resp.StatusCode() != http.StatusUnprocessableEntity {
		t.Fatalf("a 256-byte key: %d", resp.StatusCode())
	}
	b.submitOK(t, "flux-pro-1.1", long[:255], fox)
}

func TestConcurrentSubmitsWithOneKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 20
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := b.client.SubmitWithBodyWithResponse(context.Background(), "flux-dev", idem("one-decision"), "application/json", strings.NewReader(fox))
			if err != nil || resp.JSON200 == nil {
				t.Errorf("submit %d: %v %v", i, err, resp)
				return
			}
			ids[i] = resp.JSON200.Id
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("one key answered several tasks: %v", ids)
		}
	}
	b.requireCharges(t, 1, 25_000)
}

func TestUnknownModel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, model := range []string{"flux-pro-2", "flux-pro", "FLUX-DEV"} {
		resp := b.submitRaw(t, model, "k-"+model, fox)
		if resp.StatusCode() != http.StatusNotFound || resp.JSON404 == nil {
			t.Fatalf("%s: %d %s", model, resp.StatusCode(), resp.Body)
		}
	}
	b.requireCharges(t, 0, 0)
}

func TestValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name, model, body, want string
	}{
		{"not JSON", "flux-dev", `{"prompt":`, "not valid JSON"},
		{"not an object", "flux-dev", `["a fox"]`, "JSON object"},
		{"no prompt", "flux-dev", `{"width":1024,"height":768}`, "prompt"},
		{"empty prompt", "flux-dev", `{"prompt":"  ","width":1024,"height":768}`, "prompt"},
		{"prompt not a string", "flux-dev", `{"prompt":7,"width":1024,"height":768}`, "prompt: must be a string"},
		{"only width", "flux-pro-1.1", `{"prompt":"fox","width":1024}`, "width and height: give both or neither"},
		{"too narrow", "flux-dev", `{"prompt":"fox","width":224,"height":768}`, "width and height: must be multiples of 32 between 256 and 1440"},
		{"FLUX.2 over 4 MP", "flux-2-pro", `{"prompt":"fox","width":2048,"height":2064}`, "at most 4194304 pixels"},
		{"FLUX.2 not a multiple of 16", "flux-2-pro", `{"prompt":"fox","width":1000,"height":1000}`, "multiples of 16"},
		{"FLUX.2 safety 6", "flux-2-pro", `{"prompt":"fox","safety_tolerance":6}`, "safety_tolerance: must be between 0 and 5"},
		{"Ultra with a size", "flux-pro-1.1-ultra", `{"prompt":"fox","width":1024,"height":1024}`, "it takes aspect_ratio"},
		{"Ultra too wide", "flux-pro-1.1-ultra", `{"prompt":"fox","aspect_ratio":"3:1"}`, "aspect_ratio"},
		{"raw on FLUX.2", "flux-2-pro", `{"prompt":"fox","raw":true}`, "raw: not a parameter of flux-2-pro"},
		{"an input image on FLUX1.1", "flux-pro-1.1", `{"prompt":"fox","input_image":"` + tinyPNG + `"}`, "takes at most 0 input images"},
		{"an input image that is a URL", "flux-2-pro", `{"prompt":"fox","input_image":"https://example.com/fox.png"}`, "not URLs"},
		{"an input image that is no image", "flux-2-pro", `{"prompt":"fox","input_image":"aGVsbG8="}`, "not a PNG, JPEG or WebP image"},
		{"a second input image without the first", "flux-2-pro", `{"prompt":"fox","input_image_2":"` + tinyPNG + `"}`, "input_image_2: given without input_image"},
		{"five input images on klein", "flux-2-klein-4b", `{"prompt":"fox","input_image":"` + tinyPNG + `","input_image_2":"` + tinyPNG +
			`","input_image_3":"` + tinyPNG + `","input_image_4":"` + tinyPNG + `","input_image_5":"` + tinyPNG + `"}`, "takes at most 4 input images"},
		{"a Kontext edit at safety 3", "flux-kontext-pro", `{"prompt":"fox","input_image":"` + tinyPNG + `","safety_tolerance":3}`, "between 0 and 2"},
		{"too tall", "flux-dev", `{"prompt":"fox","width":1024,"height":1472}`, "height"},
		{"not a multiple of 32", "flux-dev", `{"prompt":"fox","width":1000,"height":768}`, "width"},
		{"fractional width", "flux-dev", `{"prompt":"fox","width":1024.5,"height":768}`, "width: must be an integer"},
		{"bad output format", "flux-dev", `{"prompt":"fox","width":1024,"height":768,"output_format":"gif"}`, "output_format"},
		{"bad safety tolerance", "flux-dev", `{"prompt":"fox","width":1024,"height":768,"safety_tolerance":7}`, "safety_tolerance"},
		{"seed not an integer", "flux-dev", `{"prompt":"fox","width":1024,"height":768,"seed":"7"}`, "seed"},
		{"trailing data", "flux-dev", fox + `{}`, "after its JSON object"},
	}
	for _, c := range cases {
		resp := b.submitRaw(t, c.model, "", c.body)
		if resp.StatusCode() != http.StatusUnprocessableEntity || resp.JSON422 == nil || !strings.Contains(resp.JSON422.Detail, c.want) {
			t.Errorf("%s: %d %s, want 422 saying %q", c.name, resp.StatusCode(), resp.Body, c.want)
		}
	}
	b.requireCharges(t, 0, 0)
	// Null optional fields are absent ones, and unknown fields are allowed.
	b.submitOK(t, "flux-dev", "", `{"prompt":"fox","width":256,"height":1440,"seed":null,"output_format":null,"steps":28}`)
	b.requireCharges(t, 1, 25_000)
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	open := setup(t) // no --api-key: any non-empty key
	for _, key := range []string{"x", "anything at all"} {
		c := open.newClient(t, key)
		if resp, err := c.SubmitWithResponse(context.Background(), "flux-dev", idem(""), bflapi.FluxRequest{Prompt: "fox", Width: ptr(512), Height: ptr(512)}); err != nil || resp.StatusCode() != http.StatusOK {
			t.Fatalf("key %q: %v %v", key, err, resp)
		}
	}
	resp := must(open.anonymous.SubmitWithBodyWithResponse(context.Background(), "flux-dev", idem(""), "application/json", strings.NewReader(fox)))(t)
	if resp.StatusCode() != http.StatusUnauthorized || resp.JSON401 == nil {
		t.Fatalf("no key: %d %s", resp.StatusCode(), resp.Body)
	}
	poll := must(open.anonymous.GetResultWithResponse(context.Background(), &bflapi.GetResultParams{Id: "x"}))(t)
	if poll.StatusCode() != http.StatusUnauthorized {
		t.Fatalf("poll without a key: %d", poll.StatusCode())
	}
	open.requireCharges(t, 2, 50_000)

	locked := setupWith(t, config{apiKey: "s3cret", pendingPolls: 1})
	wrong := locked.newClient(t, "guess")
	resp = must(wrong.SubmitWithBodyWithResponse(context.Background(), "flux-dev", idem(""), "application/json", strings.NewReader(fox)))(t)
	if resp.StatusCode() != http.StatusForbidden || resp.JSON403 == nil {
		t.Fatalf("wrong key: %d %s", resp.StatusCode(), resp.Body)
	}
	poll = must(wrong.GetResultWithResponse(context.Background(), &bflapi.GetResultParams{Id: "x"}))(t)
	if poll.StatusCode() != http.StatusForbidden {
		t.Fatalf("poll with a wrong key: %d", poll.StatusCode())
	}
	locked.requireCharges(t, 0, 0)
	locked.submitOK(t, "flux-dev", "", fox) // the right key
	locked.requireCharges(t, 1, 25_000)
	if strings.Contains(locked.logs.String(), "s3cret") {
		t.Fatal("the API key reached the log")
	}

	health := must(locked.anonymous.GetHealthzWithResponse(context.Background()))(t)
	if health.JSON200 == nil || health.JSON200.Status != bflapi.Ok {
		t.Fatalf("healthz: %v", health)
	}
	// Not in the spec, so not through the validating transport.
	nowhere, err := http.Get(locked.url + "/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(nowhere.Body)
	nowhere.Body.Close()
	if nowhere.StatusCode != http.StatusNotFound || detail(t, body) == "" {
		t.Fatalf("unknown route: %d %s", nowhere.StatusCode, body)
	}
}

func ptr[T any](v T) *T { return &v }

func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
