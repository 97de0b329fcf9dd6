package mcpserver_test

import (
	"fmt"
	"testing"
)

func TestReadOnlyTools(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	missing := `{"public_handle":"hubu:public-operation:v1:00000000-0000-4000-8000-00000000abcd"}`
	mustError(t, e.call(t, "operation_status", missing, nil), "not_found")
	mustError(t, e.call(t, "resume_operation", missing, nil), "not_found")
	mustError(t, e.call(t, "operation_status", `{"public_handle":"not-a-handle"}`, nil), "invalid_arguments")
	mustError(t, e.call(t, "capabilities", `{"anything":1}`, nil), "invalid_arguments")

	caps := toolResult(t, e.call(t, "capabilities", `{}`, nil))
	sources, _ := caps.Details["identity_sources"].([]any)
	if caps.Status != "ok" || len(sources) != 3 {
		t.Fatalf("capabilities: %+v", caps)
	}
	handle := toolResult(t, e.call(t, "generate_image", fox, codex("call_ro1d5hchBzp4PbAsEjoKtwVJ"))).PublicHandle
	st := toolResult(t, e.call(t, "operation_status", fmt.Sprintf(`{"public_handle":%q}`, handle), nil))
	if st.PublicHandle != handle || st.Status != "executing" {
		t.Fatalf("status: %+v", st)
	}
	ex := toolResult(t, e.call(t, "get_execution", fmt.Sprintf(`{"public_handle":%q}`, handle), nil))
	if ex.Status != "succeeded" || ex.Result == nil {
		t.Fatalf("execution: %+v", ex)
	}
}
