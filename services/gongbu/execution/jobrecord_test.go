package execution_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

// failJobRecords makes the next n writes that record a provider's job fail, as a dropped
// connection or a Postgres restart would: a trigger raises while a sequence (which no
// rollback resets) counts up to n.
func failJobRecords(t *testing.T, env *gongbutest.Env, n int) {
	t.Helper()
	ctx := context.Background()
	for _, stmt := range []string{
		`CREATE SEQUENCE job_record_failures`,
		`CREATE FUNCTION fail_job_record() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN
		   IF nextval('job_record_failures') <= ` + strconv.Itoa(n) + ` THEN
		     RAISE EXCEPTION 'injected: the record of a submitted job fails';
		   END IF;
		   RETURN NEW;
		 END $$`,
		`CREATE TRIGGER fail_job_record BEFORE UPDATE ON executions FOR EACH ROW
		 WHEN (NEW.state = 'submitted' AND OLD.state = 'submitting') EXECUTE FUNCTION fail_job_record()`,
	} {
		if _, err := env.Pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
}

// The provider accepted the job and the first record of it failed (the issue's reproduction:
// Postgres restarted while the provider answered). The worker tries again: the job is
// recorded and polled, not left to become indeterminate with its id only in memory.
func TestAJobWhoseRecordFailsIsRecordedOnRetry(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false) // a provider that ignores keys: a lost job cannot be found again by resubmitting
	failJobRecords(t, env, 2)
	d := env.Issue("agent-a")
	x, _ := mustExecute(t, env, d)
	if x.State != gongbu.StateSubmitted || x.ProviderJobID == nil || *x.ProviderJobID != "job-1" {
		t.Fatalf("after two failed records: %+v", x)
	}
	if n := env.Provider.Submits(); n != 1 {
		t.Fatalf("%d submits, want 1", n)
	}
	env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/samples/job-1.png", ""))
	runFor(t, env, 1)
	if x := env.Get(t, d.DecisionID); x.State != gongbu.StateSucceeded {
		t.Fatalf("%+v", x)
	}
}

// When the record keeps failing for longer than the worker's patience, the job's id is logged
// with its execution, and this process's recovery records it once the lease runs out instead
// of calling the execution indeterminate.
func TestAJobWhoseRecordKeepsFailingIsRecoveredByItsProcess(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	env.Service.RecordPatience = 100 * time.Millisecond
	failJobRecords(t, env, 9) // more tries than fit in the patience
	d := env.Issue("agent-a")
	if x, _ := mustExecute(t, env, d); x.State != gongbu.StateSubmitting {
		t.Fatalf("while the record fails: %+v", x)
	}
	logs := env.Logs.String()
	if !strings.Contains(logs, `"msg":"could not record a submitted job`) || !strings.Contains(logs, `"job_id":"job-1"`) ||
		!strings.Contains(logs, d.DecisionID.String()) {
		t.Fatalf("the log does not carry the job with its execution:\n%s", logs)
	}
	if _, err := env.Pool.Exec(context.Background(), `DROP TRIGGER fail_job_record ON executions`); err != nil {
		t.Fatal(err)
	}
	runFor(t, env, 1)
	x := env.Get(t, d.DecisionID)
	if x.State != gongbu.StateSubmitted || x.ProviderJobID == nil || *x.ProviderJobID != "job-1" {
		t.Fatalf("after recovery: %+v", x)
	}
	if n := env.Provider.Submits(); n != 1 {
		t.Fatalf("%d submits, want 1", n)
	}
}
