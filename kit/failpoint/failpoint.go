// Package failpoint puts named crash points into the binaries of the e2e build. Built
// without the `failpoints` tag (every normal build), Inject does nothing and costs nothing.
// Built with it, a process started with HUBU_FAILPOINTS=name[,name...] kills itself with
// SIGKILL when it reaches a named point, exactly as a crash or a power cut would stop it
// there; the e2e suite then restarts the process without the variable and checks that
// nothing was charged twice. The same build reads HUBU_CLOCK_OFFSET through Clock, which
// Hubu and Gongbu use as their clock, so the fault explorer can make a process's time jump.
package failpoint

// Names of the failpoints (the e2e suite and the docs refer to these).
const (
	RouterAfterRegistryInsert = "router-after-registry-insert" // the call is recorded, nothing forwarded yet
	RouterAfterBackendAnswer  = "router-after-backend-answer"  // Hubu answered, the result is not recorded
	HubuAfterAuthorizeCommit  = "hubu-after-authorize-commit"  // the decision is committed, not handed to Gongbu
	HubuBeforeHandOff         = "hubu-before-hand-off"         // the hand-off is counted, not yet sent to Gongbu
	HubuAfterGongbuAnswer     = "hubu-after-gongbu-answer"     // Gongbu accepted the decision, Hubu has not recorded it
	GongbuAfterSubmitting     = "gongbu-after-submitting"      // submitting is recorded, the provider not called
	GongbuAfterProviderAnswer = "gongbu-after-provider-answer" // the provider answered, the job is not recorded
)
