package execution

import (
	"context"
	"errors"
	"time"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/postgres"
)

// A provider's delivery URL expires (BFL's within ten minutes), so Gongbu downloads a result
// the moment a poll finds it Ready, records the success and the image together, and serves
// the image from then on. A download that fails does not hold the success back (the provider
// charged for it either way): it is recorded without the image, and the background pass tries
// the download again while the URL may still work.
const (
	// imageTimeout bounds one download, and the background pass's downloads together.
	imageTimeout = 10 * time.Second
	// imageRetryWindow is how long after a success its image is still tried.
	imageRetryWindow = 15 * time.Minute
	// imageMaxAttempts bounds the background pass's tries of one image.
	imageMaxAttempts = 5
	// imageRetryBackoff is the wait after the background pass's first try of an image; it
	// doubles with every try (15 s, 30 s, 1 min, 2 min: the last try is about 4 minutes after
	// the success). It is longer than imageTimeout, so no two tries of an image overlap.
	imageRetryBackoff = 15 * time.Second
	// imagesPerPass bounds the downloads of one background pass.
	imagesPerPass = 4
)

// succeeded is the outcome of a job a poll found Ready: the success, with the image it
// delivered when the provider's results are downloaded. The download first extends the lease
// for its bound, so that no other worker takes the job over meanwhile; when the lease is lost
// or cannot be extended, the success goes without the image (and the worker that took the job
// over records its own).
func (s *Service) succeeded(ctx context.Context, provider gongbu.Provider, exec gongbu.Execution, url string) gongbu.Outcome {
	o := gongbu.Succeeded(url, s.charge(ctx, exec))
	fetcher, ok := provider.(gongbu.ResultFetcher)
	if !ok {
		return o
	}
	now := s.Now()
	if err := s.Store.ExtendLease(ctx, exec, now.Add(max(s.Lease, imageTimeout+recordTimeout)), now); err != nil {
		if !errors.Is(err, gongbu.ErrLeaseLost) {
			s.logger().WarnContext(ctx, "could not extend the lease to download the result; recording the success without it",
				"decision_id", exec.DecisionID, "err", err)
		}
		return o
	}
	ctx, cancel := context.WithTimeout(ctx, imageTimeout)
	defer cancel()
	return o.WithImage(s.fetchResult(ctx, fetcher, exec, url))
}

// fetchResult downloads what a Ready job delivered; nil when the download failed (logged: the
// background pass tries again).
func (s *Service) fetchResult(ctx context.Context, fetcher gongbu.ResultFetcher, exec gongbu.Execution, url string) *gongbu.Image {
	img, err := fetcher.FetchResult(ctx, url)
	if err != nil {
		s.logger().WarnContext(ctx, "could not download the result; the success is recorded without it and the download tried again",
			"decision_id", exec.DecisionID, "err", err)
		return nil
	}
	if err := img.Prepare(); err != nil {
		// Kept all the same: readable in full, only not embedded when it is large.
		s.logger().WarnContext(ctx, "could not read the result's sides or make its preview; it is kept without them",
			"decision_id", exec.DecisionID, "err", err)
	}
	return &img
}

// fetchMissingImages tries again the downloads that failed when their success was recorded,
// a few per pass and within imageTimeout together, so that a delivery host that hangs cannot
// hold up the pass's polls and reports; each try is claimed, so one worker in one replica
// makes it. Once the pass's time is spent, the images left are not claimed: a claim counts a
// try, and a try that could not download would bring an image nearer its last.
func (s *Service) fetchMissingImages(ctx context.Context) error {
	retry := postgres.ImageRetry{Since: s.Now().Add(-imageRetryWindow), MaxAttempts: imageMaxAttempts, Backoff: imageRetryBackoff}
	missing, err := s.Store.ListImagesMissing(ctx, retry, s.Now(), imagesPerPass)
	if err != nil || len(missing) == 0 {
		return err
	}
	downloads, cancel := context.WithTimeout(ctx, imageTimeout)
	defer cancel()
	for _, id := range missing {
		if downloads.Err() != nil {
			break // the next pass tries them
		}
		exec, ok, err := s.Store.ClaimImageFetch(ctx, id, retry, s.Now())
		if err != nil {
			return err
		}
		fetcher, found := s.Providers[exec.Scope.Provider].(gongbu.ResultFetcher)
		if !ok || !found || exec.ResultURL == nil {
			continue
		}
		img := s.fetchResult(downloads, fetcher, exec, *exec.ResultURL)
		if img == nil {
			continue
		}
		if _, err := s.Store.KeepImage(ctx, id, *img, s.Now()); err != nil {
			// Counted as a try (the claim was): a write that keeps failing ends with the tries.
			s.logger().WarnContext(ctx, "could not keep a downloaded result", "decision_id", id, "err", err)
		}
	}
	return nil
}
