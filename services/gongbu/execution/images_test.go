package execution_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/execution"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

// readyWithImages executes a decision on a provider whose results Gongbu downloads, and
// scripts its job Ready on the first poll.
// With wrap, the service calls the provider through it.
func readyWithImages(t *testing.T, env *gongbutest.Env, p *gongbutest.ImageProvider, url string, wrap ...func(gongbu.Provider) gongbu.Provider) gongbu.Decision {
	t.Helper()
	var provider gongbu.Provider = p
	for _, w := range wrap {
		provider = w(provider)
	}
	env.Service = env.NewService(provider)
	d := env.Issue("agent-a")
	if x, _ := mustExecute(t, env, d); x.State != gongbu.StateSubmitted {
		t.Fatalf("state %s", x.State)
	}
	p.OnPoll(gongbutest.Answer(gongbu.JobReady, url, ""))
	env.Clock.Advance(gongbutest.PollInterval)
	env.Tick(t)
	return d
}

// keptImage reads the image Gongbu keeps for d, or nil.
func keptImage(t *testing.T, env *gongbutest.Env, d gongbu.Decision) []byte {
	t.Helper()
	img, digest, err := env.Store.ImageByHandle(context.Background(), d.PublicHandle)
	if gongbu.ErrorCode(err) == gongbu.CodeNotFound {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if digest != sha256.Sum256(img.Bytes) || img.MIMEType != "image/png" {
		t.Fatalf("kept image %s with a digest that is not its own", img.MIMEType)
	}
	return img.Bytes
}

// A success and the image it delivered are recorded together, before Hubu is told.
func TestReadyKeepsTheImageWithTheSuccess(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	p := gongbutest.NewImageProvider(true)
	d := readyWithImages(t, env, p, "https://provider.test/s.png")

	got := env.Get(t, d.DecisionID)
	if got.State != gongbu.StateSucceeded || !got.Reported || got.Image == nil {
		t.Fatalf("after ready: %s, reported %v, image %+v", got.State, got.Reported, got.Image)
	}
	if got.Image.MIMEType != "image/png" || got.Image.Size != len(gongbutest.TinyPNG) || got.Image.SHA256 != sha256.Sum256(gongbutest.TinyPNG) {
		t.Fatalf("image described as %+v", got.Image)
	}
	if !bytes.Equal(keptImage(t, env, d), gongbutest.TinyPNG) {
		t.Fatal("the kept image is not what the provider delivered")
	}
	if f := p.Fetched(); len(f) != 1 || f[0] != "https://provider.test/s.png" {
		t.Fatalf("downloaded %q, want the sample once", f)
	}
	runFor(t, env, 3)
	if n := len(p.Fetched()); n != 1 {
		t.Fatalf("a kept image was downloaded %d times", n)
	}
}

// A download that fails does not hold the success or its report back; the background pass
// tries again after a pause, a bounded number of times, in one replica at a time.
func TestImageDownloadRetriedByTheBackgroundPass(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	p := gongbutest.NewImageProvider(true)
	p.OnFetch(gongbutest.FetchError(), gongbutest.FetchError())
	d := readyWithImages(t, env, p, "https://provider.test/s.png")

	got := env.Get(t, d.DecisionID)
	if got.State != gongbu.StateSucceeded || !got.Reported || got.Image != nil {
		t.Fatalf("after a failed download: %s, reported %v, image %+v", got.State, got.Reported, got.Image)
	}
	if r := env.Authority.Reports(); len(r) != 1 || !r[0].Settled {
		t.Fatalf("reports %+v, want the success settled at once", r)
	}

	// The first retry fails too; the next comes no sooner than the back-off, from one of two
	// replicas passing at once.
	env.Tick(t)
	if n := len(p.Fetched()); n != 2 {
		t.Fatalf("%d downloads, want the retry at once", n)
	}
	other := env.NewService(p)
	bothPass := func() { // the background passes of two replicas at once
		gongbutest.AtOnce(2, func(i int) {
			if err := []*execution.Service{env.Service, other}[i].Tick(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	bothPass()
	if n := len(p.Fetched()); n != 2 {
		t.Fatalf("%d downloads, want none before the back-off", n)
	}
	env.Clock.Advance(20 * time.Second)
	bothPass()
	if n := len(p.Fetched()); n != 3 {
		t.Fatalf("%d downloads, want one retry across both replicas", n)
	}
	if !bytes.Equal(keptImage(t, env, d), gongbutest.TinyPNG) {
		t.Fatal("the retried download was not kept")
	}
	if got := env.Get(t, d.DecisionID); got.Image == nil || got.Image.Size != len(gongbutest.TinyPNG) {
		t.Fatalf("after the retry the execution describes %+v", got.Image)
	}
	env.Clock.Advance(time.Minute)
	env.Tick(t)
	if n := len(p.Fetched()); n != 3 {
		t.Fatalf("a kept image was downloaded again: %d downloads", n)
	}
	if r := env.Authority.Reports(); len(r) != 1 {
		t.Fatalf("the image changed the reports: %+v", r)
	}
}

// A pass whose time a hanging download spent claims no other image: a claim counts a try, and
// the images left are tried by the next pass, at once. (It waits out the pass's 10 s bound.)
func TestImagePassSpentClaimsNoMore(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	p := gongbutest.NewImageProvider(true)
	var hanging atomic.Bool // false: every download fails; true: the first hangs, the rest succeed in time
	var hung atomic.Bool
	for range 50 {
		p.OnFetch(func(ctx context.Context, _ string) (gongbu.Image, error) {
			switch {
			case !hanging.Load():
				return gongbu.Image{}, errors.New("sample download failed (test)")
			case hung.CompareAndSwap(false, true):
				<-ctx.Done()
				return gongbu.Image{}, ctx.Err()
			case ctx.Err() != nil:
				return gongbu.Image{}, ctx.Err()
			}
			return gongbu.NewImage("image/png", gongbutest.TinyPNG)
		})
	}
	first := readyWithImages(t, env, p, "https://provider.test/first.png")
	second := readyWithImages(t, env, p, "https://provider.test/second.png")
	env.Clock.Advance(time.Minute) // both due again, well within their tries
	hanging.Store(true)

	before := len(p.Fetched())
	env.Tick(t)
	if n := len(p.Fetched()) - before; n != 1 {
		t.Fatalf("the pass whose download hung made %d downloads, want that one only", n)
	}
	env.Tick(t) // at once: the one that hung waits its back-off, the other was never tried
	if n := len(p.Fetched()) - before; n != 2 {
		t.Fatalf("%d downloads in all, want the image the spent pass left, at once", n)
	}
	kept := 0
	for _, d := range []gongbu.Decision{first, second} {
		if keptImage(t, env, d) != nil {
			kept++
		}
	}
	if kept != 1 {
		t.Fatalf("%d images kept, want the one the next pass downloaded", kept)
	}
}

// An image that never downloads is tried a bounded number of times, and not at all once its
// delivery URL has surely expired.
func TestImageRetriesAreBounded(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	p := gongbutest.NewImageProvider(true)
	for range 20 {
		p.OnFetch(gongbutest.FetchError())
	}
	d := readyWithImages(t, env, p, "https://provider.test/s.png")
	for range 10 {
		env.Clock.Advance(time.Minute)
		env.Tick(t)
	}
	if n := len(p.Fetched()); n != 1+5 {
		t.Fatalf("%d downloads, want the first and 5 retries", n)
	}
	if got := env.Get(t, d.DecisionID); got.State != gongbu.StateSucceeded || got.Image != nil {
		t.Fatalf("%s with image %+v", got.State, got.Image)
	}

	late := gongbutest.NewImageProvider(true)
	late.OnFetch(gongbutest.FetchError(), gongbutest.FetchError())
	d2 := readyWithImages(t, env, late, "https://provider.test/late.png") // the download and a retry at once
	env.Clock.Advance(2 * time.Hour)
	env.Tick(t)
	if n := len(late.Fetched()); n != 2 {
		t.Fatalf("%d downloads of %s, want none after its URL expired", n, d2.PublicHandle)
	}
}

// What the provider delivers is checked before it is kept.
func TestNewImageRefusesWhatIsNotTheDeclaredImage(t *testing.T) {
	for _, c := range []struct {
		name, mimeType string
		body           []byte
	}{
		{"html", "text/html", []byte("<html></html>")},
		{"empty", "image/png", nil},
		{"not a png", "image/png", []byte("GIF89a........")},
		{"declared jpeg, is png", "image/jpeg", gongbutest.TinyPNG},
		{"too large", "image/png", append(append([]byte{}, gongbutest.TinyPNG...), make([]byte, gongbu.MaxImageBytes)...)},
	} {
		if _, err := gongbu.NewImage(c.mimeType, c.body); err == nil {
			t.Errorf("%s: kept", c.name)
		}
	}
	if _, err := gongbu.NewImage("image/png", gongbutest.TinyPNG); err != nil {
		t.Fatal(err)
	}
}

// A download takes the lease for its bound first: a provider's webhook holds a job only for a
// poll interval, and a slow download must not let another worker take the job over, poll it
// again and download it again.
func TestSlowDownloadKeepsTheLease(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	p := gongbutest.NewImageProvider(true)
	env.Service = env.NewService(p)
	started, release := make(chan struct{}), make(chan struct{})
	p.OnFetch(func(ctx context.Context, _ string) (gongbu.Image, error) {
		close(started)
		<-release
		return gongbu.NewImage("image/png", gongbutest.TinyPNG)
	})
	p.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	d := env.Issue("agent-a")
	x, _ := mustExecute(t, env, d)
	done := make(chan error, 1)
	go func() {
		_, err := env.Service.Nudge(context.Background(), x)
		done <- err
	}()
	<-started
	env.Clock.Advance(5 * gongbutest.PollInterval) // well past the webhook's lease
	other := env.NewService(p)
	if err := other.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := p.Polls(); n != 1 {
		t.Fatalf("%d polls: another worker took the job over during the download", n)
	}
	if got := env.Get(t, d.DecisionID); got.State != gongbu.StateSucceeded || got.Image == nil || !got.Reported {
		t.Fatalf("after the slow download: %s, image %v, reported %v", got.State, got.Image, got.Reported)
	}
	if logs := env.Logs.String(); strings.Contains(logs, "outcome not recorded") {
		t.Fatalf("a worker lost the lease during the download:\n%s", logs)
	}
}

// A success whose image cannot be written with it is recorded and reported without it.
func TestSuccessRecordedWhenItsImageCannotBe(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, true)
	// The database refuses the image (as it would one beyond its limits), not the success.
	if _, err := env.Pool.Exec(context.Background(),
		"ALTER TABLE execution_images ADD CONSTRAINT refuse_all CHECK (octet_length(image) < 0) NOT VALID"); err != nil {
		t.Fatal(err)
	}
	p := gongbutest.NewImageProvider(true)
	d := readyWithImages(t, env, p, "https://provider.test/s.png")
	got := env.Get(t, d.DecisionID)
	if got.State != gongbu.StateSucceeded || !got.Reported || got.Image != nil {
		t.Fatalf("%s, reported %v, image %+v", got.State, got.Reported, got.Image)
	}
	if r := env.Authority.Reports(); len(r) != 1 || !r[0].Settled {
		t.Fatalf("reports %+v", r)
	}
}

// An edit sends the images Gongbu keeps for its inputs, when they are the same agent's
// results; naming another agent's result fails the edit before anything reaches the provider,
// with nothing charged.
func TestEditSendsItsInputImages(t *testing.T) {
	t.Parallel()
	env := gongbutest.New(t, false)
	p := gongbutest.NewImageProvider(false)
	first := readyWithImages(t, env, p, "https://provider.test/s.png")
	var sent []gongbu.Image
	edit := func(agent uuid.UUID) gongbu.Decision {
		return env.IssueWith("agent-a", func(d *gongbu.Decision) {
			d.AgentID, d.Tool = agent, gongbu.ToolEditImage
			d.Scope.Model = "flux-2-pro"
			d.Arguments = gongbu.ImageArguments{Prompt: "make it blue", Model: "flux-2-pro", InputImages: []string{first.PublicHandle}}
		})
	}
	p.OnSubmit(func(_ context.Context, key string, d gongbu.Decision) (gongbu.Job, error) {
		sent = d.Inputs
		return p.Accept()(context.Background(), key, d)
	})
	if x, _ := mustExecute(t, env, edit(first.AgentID)); x.State != gongbu.StateSubmitted || len(sent) != 1 ||
		!bytes.Equal(sent[0].Bytes, gongbutest.TinyPNG) || sent[0].MIMEType != "image/png" {
		t.Fatalf("own edit: %s, sent %d inputs", x.State, len(sent))
	}
	submits := p.Submits()
	x, _ := mustExecute(t, env, edit(uuid.New()))
	if x.State != gongbu.StateFailed || x.ChargedMicros == nil || *x.ChargedMicros != 0 || !strings.Contains(*x.Error, "input images could not be read") {
		t.Fatalf("an edit of another agent's result: %s %v", x.State, x.Error)
	}
	if p.Submits() != submits {
		t.Fatal("an edit of another agent's result reached the provider")
	}
}
