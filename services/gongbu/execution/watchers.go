package execution

import (
	"sync"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu"
)

// watchers are the jobs this process's workers are watching (Service.watch), by provider and
// job, so that a provider's notice that one of them is done wakes its watcher instead of
// claiming the job in the database. The watcher holds the job's lease already: a claim would
// cost a read and a write, take the lease from it, and have the job polled (and its result
// downloaded) twice whenever the notice came while the watcher was looking. A notice about a
// job that no worker here watches (another replica's, or one left to the background pass)
// goes through the database as before (Nudge).
type watchers struct {
	mu    sync.Mutex
	byJob map[watchedJob]*watcher
}

type watchedJob struct{ provider, job string }

type watcher struct {
	decisionID uuid.UUID
	wake       chan struct{} // one buffered wake-up: a notice that comes mid-look is not lost
}

// watchReg is one watcher's registration; its zero value registers nothing.
type watchReg struct {
	ws  *watchers
	key watchedJob
	w   *watcher
}

// add registers a watcher of provider's job, which runs decisionID; the caller removes it
// when it stops watching. An empty job (none was accepted) registers nothing: no notice can
// name it.
func (ws *watchers) add(provider, job string, decisionID uuid.UUID) watchReg {
	if job == "" {
		return watchReg{}
	}
	r := watchReg{ws: ws, key: watchedJob{provider: provider, job: job},
		w: &watcher{decisionID: decisionID, wake: make(chan struct{}, 1)}}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.byJob == nil {
		ws.byJob = make(map[watchedJob]*watcher)
	}
	ws.byJob[r.key] = r.w // a later watcher of the job (one that took it over) is the one to wake
	return r
}

// of registers the watcher of exec's job.
func (ws *watchers) of(exec gongbu.Execution) watchReg {
	return ws.add(exec.Scope.Provider, deref(exec.ProviderJobID), exec.DecisionID)
}

// wakeups is the channel a notice wakes the watcher by; nil, never ready, when nothing is
// registered.
func (r watchReg) wakeups() <-chan struct{} {
	if r.w == nil {
		return nil
	}
	return r.w.wake
}

// remove unregisters the watcher, unless a later watcher of the same job replaced it.
func (r watchReg) remove() {
	if r.w == nil {
		return
	}
	r.ws.mu.Lock()
	defer r.ws.mu.Unlock()
	if r.ws.byJob[r.key] == r.w {
		delete(r.ws.byJob, r.key)
	}
}

// Watching reports whether a worker of this process is watching provider's job, and if so the
// job's decision (a notice is verified against it) and a function that makes the watcher look
// at the job at once. A worker stops watching when the job's outcome is recorded, when it
// hands the job to the background pass, or when it loses the lease: a notice then goes to
// Nudge.
func (s *Service) Watching(provider, job string) (decisionID uuid.UUID, wake func(), ok bool) {
	s.watching.mu.Lock()
	w, ok := s.watching.byJob[watchedJob{provider: provider, job: job}]
	s.watching.mu.Unlock()
	if !ok {
		return uuid.Nil, nil, false
	}
	return w.decisionID, func() {
		select {
		case w.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}, true
}
