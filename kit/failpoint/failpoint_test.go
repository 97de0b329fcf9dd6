package failpoint

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestInject runs this test binary again with the failpoint armed: built with the tag it
// must die by SIGKILL at the point; built without it, it must run through.
func TestInject(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Inject(RouterAfterRegistryInsert)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInject$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", "HUBU_FAILPOINTS=other,"+RouterAfterRegistryInsert)
	out, err := cmd.CombinedOutput()
	if Enabled {
		if err == nil || !strings.Contains(err.Error(), "killed") || !strings.Contains(string(out), RouterAfterRegistryInsert) {
			t.Fatalf("armed failpoint did not crash: %v %s", err, out)
		}
		return
	}
	if err != nil {
		t.Fatalf("without the failpoints tag the point must do nothing: %v %s", err, out)
	}
}
