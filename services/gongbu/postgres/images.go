package postgres

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/sql/gongbu/gongbudb"
)

// ImageRetry says which missing images the background pass tries again: those of successes
// recorded after Since (older delivery URLs have expired), at most MaxAttempts times each, the
// next attempt no sooner than Backoff after the first, twice as long after each one after it.
type ImageRetry struct {
	Since       time.Time
	MaxAttempts int32
	Backoff     time.Duration
}

// ListImagesMissing returns up to limit successes whose image Gongbu does not keep and may
// still download, oldest first.
func (s *Store) ListImagesMissing(ctx context.Context, r ImageRetry, now time.Time, limit int32) ([]uuid.UUID, error) {
	ids, err := s.q.ListImagesMissing(ctx, s.pool, gongbudb.ListImagesMissingParams{
		Since: r.Since, MaxAttempts: r.MaxAttempts, Now: &now, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("list missing images: %w", err)
	}
	return ids, nil
}

// ClaimImageFetch counts an attempt to download a missing image, and puts the next one off (see
// ImageRetry); ok is false when the image is kept already, or another worker claimed the attempt.
func (s *Store) ClaimImageFetch(ctx context.Context, id uuid.UUID, r ImageRetry, now time.Time) (exec gongbu.Execution, ok bool, err error) {
	row, err := s.q.ClaimImageFetch(ctx, s.pool, gongbudb.ClaimImageFetchParams{
		DecisionID: id, BackoffSeconds: r.Backoff.Seconds(), MaxAttempts: r.MaxAttempts, Now: now})
	if isNoRows(err) {
		return gongbu.Execution{}, false, nil
	}
	if err != nil {
		return gongbu.Execution{}, false, fmt.Errorf("claim an image download: %w", err)
	}
	exec, err = executionOf(row)
	return exec, err == nil, err
}

// KeepImage keeps the image of a success recorded without it. An image kept already is left
// as it is (kept is then false).
func (s *Store) KeepImage(ctx context.Context, id uuid.UUID, img gongbu.Image, now time.Time) (kept bool, err error) {
	c := imageColumnsOf(img)
	_, err = s.q.KeepImage(ctx, s.pool, gongbudb.KeepImageParams{
		DecisionID: id, ImageMimeType: c.mimeType, ImageSha256: c.sha256, ImageSize: c.size, ImageWidth: c.width, ImageHeight: c.height,
		PreviewSha256: c.previewSHA256, PreviewSize: c.previewSize, PreviewWidth: c.previewWidth, PreviewHeight: c.previewHeight,
		Image: c.image, Preview: c.preview, Now: now})
	if isNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("keep an image: %w", err)
	}
	return true, nil
}

// ImageByHandle returns the image Gongbu keeps for an operation; a not_found *gongbu.Error when
// it keeps none.
func (s *Store) ImageByHandle(ctx context.Context, publicHandle string) (gongbu.Image, [sha256.Size]byte, error) {
	row, err := s.q.GetImageByHandle(ctx, s.pool, publicHandle)
	if isNoRows(err) {
		return gongbu.Image{}, [sha256.Size]byte{}, gongbu.Errorf(gongbu.CodeNotFound, "no image for that operation")
	}
	if err != nil {
		return gongbu.Image{}, [sha256.Size]byte{}, fmt.Errorf("read an image: %w", err)
	}
	var digest [sha256.Size]byte
	copy(digest[:], row.ImageSha256)
	return gongbu.Image{MIMEType: *row.ImageMimeType, Bytes: row.Image}, digest, nil
}

// InputImage returns the image an edit names by its public handle, if it is a result of
// agentID's that Gongbu keeps; a not_found *gongbu.Error otherwise (another agent's result is
// not told apart from none).
func (s *Store) InputImage(ctx context.Context, publicHandle string, agentID uuid.UUID) (gongbu.Image, error) {
	row, err := s.q.GetInputImage(ctx, s.pool, publicHandle)
	switch {
	case isNoRows(err) || (err == nil && row.AgentID != agentID):
		return gongbu.Image{}, gongbu.Errorf(gongbu.CodeNotFound, "%s is no result of the agent's that Gongbu keeps", publicHandle)
	case err != nil:
		return gongbu.Image{}, fmt.Errorf("read an input image: %w", err)
	}
	return gongbu.Image{MIMEType: *row.ImageMimeType, Bytes: row.Image}, nil
}

// PreviewByHandle returns the preview of the image Gongbu keeps for an operation; a not_found
// *gongbu.Error when it keeps none (no image, or an image small enough to need none).
func (s *Store) PreviewByHandle(ctx context.Context, publicHandle string) (gongbu.Preview, [sha256.Size]byte, error) {
	row, err := s.q.GetPreviewByHandle(ctx, s.pool, publicHandle)
	if isNoRows(err) {
		return gongbu.Preview{}, [sha256.Size]byte{}, gongbu.Errorf(gongbu.CodeNotFound, "no preview for that operation")
	}
	if err != nil {
		return gongbu.Preview{}, [sha256.Size]byte{}, fmt.Errorf("read a preview: %w", err)
	}
	var digest [sha256.Size]byte
	copy(digest[:], row.PreviewSha256)
	return gongbu.Preview{Bytes: row.Preview}, digest, nil
}

// PruneImages deletes up to limit kept images fetched more than olderThan ago (by the
// database's clock), with the executions' description of them, and returns how many it
// deleted.
func (s *Store) PruneImages(ctx context.Context, olderThan time.Duration, limit int32) (int64, error) {
	n, err := s.q.PruneImages(ctx, s.pool, gongbudb.PruneImagesParams{OlderThanSeconds: olderThan.Seconds(), MaxRows: limit})
	if err != nil {
		return 0, fmt.Errorf("prune images: %w", err)
	}
	return n, nil
}

// PrunableImages counts the kept images fetched more than olderThan ago, and their bytes.
func (s *Store) PrunableImages(ctx context.Context, olderThan time.Duration) (images, bytes int64, err error) {
	row, err := s.q.CountPrunableImages(ctx, s.pool, olderThan.Seconds())
	if err != nil {
		return 0, 0, fmt.Errorf("count prunable images: %w", err)
	}
	return row.Images, row.Bytes, nil
}
