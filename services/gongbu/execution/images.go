package execution

import (
	"context"
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
	// imageTimeout bounds one download.
	imageTimeout = 30 * time.Second
	// imageRetryWindow is how long after a success its image is still tried.
	imageRetryWindow = time.Hour
	// imageMaxAttempts bounds the background pass's tries of one image.
	imageMaxAttempts = 5
	// imageRetryBackoff is the least time between two tries of one image.
	imageRetryBackoff = 15 * time.Second
)

// fetchResult downloads what a Ready job delivered, when its provider's URLs expire; nil when
// the provider's do not, or the download failed (logged: the background pass tries again).
func (s *Service) fetchResult(ctx context.Context, provider gongbu.Provider, exec gongbu.Execution, url string) *gongbu.Image {
	fetcher, ok := provider.(gongbu.ResultFetcher)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, imageTimeout)
	defer cancel()
	img, err := fetcher.FetchResult(ctx, url)
	if err != nil {
		s.logger().WarnContext(ctx, "could not download the result; the success is recorded without it and the download tried again",
			"decision_id", exec.DecisionID, "err", err)
		return nil
	}
	return &img
}

// fetchMissingImages tries again the downloads that failed when their success was recorded;
// each try is claimed, so one worker in one replica makes it.
func (s *Service) fetchMissingImages(ctx context.Context) error {
	retry := postgres.ImageRetry{Since: s.Now().Add(-imageRetryWindow), MaxAttempts: imageMaxAttempts, Backoff: imageRetryBackoff}
	missing, err := s.Store.ListImagesMissing(ctx, retry, s.Now(), 20)
	if err != nil {
		return err
	}
	for _, id := range missing {
		exec, ok, err := s.Store.ClaimImageFetch(ctx, id, retry, s.Now())
		if err != nil {
			return err
		}
		provider, found := s.Providers[exec.Scope.Provider]
		if !ok || !found || exec.ResultURL == nil {
			continue
		}
		img := s.fetchResult(ctx, provider, exec, *exec.ResultURL)
		if img == nil {
			continue
		}
		if _, err := s.Store.KeepImage(ctx, id, *img, s.Now()); err != nil {
			return err
		}
	}
	return nil
}
