package e2e_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	harness "hubu.dev/hubu/e2e/stack"
)

// Editing is a spend, end to end on the real binaries against mockflux as BFL (no idempotency
// key): an agent edits its own earlier result; Gongbu sends the kept image's bytes as BFL's
// input_image, mockflux charges the output and the input megapixels, and Hubu captured exactly
// that; a redelivery of the edit is replayed, charged nothing more; another agent naming the
// same result is refused and nothing is charged.
func TestSuiteEditImage(t *testing.T) {
	t.Parallel()
	server, id, dir, idConfig := stackPlace(t)
	su := startSuite(t, harness.Config{
		Dir: dir, ServerURL: server, HubuDB: "hubu_e2e_" + id, GongbuDB: "gongbu_e2e_" + id,
		Env: map[string][]string{"router": {"ROUTER_IDENTITY_CONFIG=" + idConfig}},
	})
	cs := su.routerFor(su.s.Credentials.AgentToken, 30*time.Second, nil)
	first := su.mustSucceed(cs, `{"prompt":"an origami fox","model":"flux-2-klein-4b","width":1024,"height":1024}`,
		codexMeta("call_editsource7Tq2Wn9pVd4KzR"), "the result to edit")
	edit := fmt.Sprintf(`{"prompt":"make the fox blue","model":"flux-2-klein-4b","input_images":[%q]}`, first.handle())
	const editCall = "call_editblue3Lw8Xn2pVd6KzQ"
	edited := su.mustCall(cs, "edit_image", edit, codexMeta(editCall))
	// mockflux draws a 1024x1024 request at 64x64, so the edit makes 64x64: one output
	// megapixel (1.4 credits) and one input megapixel (0.1), as BFL prices FLUX.2 [klein] 4B.
	if edited["status"] != "succeeded" || edited.handle() == first.handle() || first["amount_micros"] != 14_000.0 || edited["amount_micros"] != 15_000.0 {
		t.Fatalf("the edit: %v (of %v)", edited, first)
	}
	again := su.mustCall(cs, "edit_image", edit, codexMeta(editCall))
	if again["replayed"] != true || again.handle() != edited.handle() {
		t.Fatalf("the edit delivered again: %v", again)
	}

	var created struct {
		Token string `json:"token"`
	}
	noError(t, json.Unmarshal([]byte(su.hubuctlOK(t, "agent", "create", "--name", "stranger", "--json")), &created))
	token := created.Token
	su.extraSecrets = append(su.extraSecrets, token)
	stranger := su.routerFor(token, 10*time.Second, []string{"--state", filepath.Join(dir, "router-stranger.db")})
	if r := su.mustCall(stranger, "edit_image", edit, codexMeta("call_editstranger5Rk1Wq8Tz4Lv")); r.code() != "invalid_arguments" {
		t.Fatalf("another agent's edit of the result: %v", r)
	}
	if n := su.charges().Count; n != 2 {
		t.Fatalf("%d charges, want the generation's and the edit's", n)
	}
	su.settleAndReconcile(2)
}
