package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"hubu.dev/hubu/kit/command"
)

// minImageAge is the youngest image prune-images deletes: a redelivery of a call, or an
// agent's get_execution, embeds the image from Gongbu, and harnesses redeliver within a session.
const minImageAge = 24 * time.Hour

// pruneImagesBatch is how many images one statement deletes; each is up to 32 MiB.
const pruneImagesBatch = 100

// pruneImagesCmd deletes the images Gongbu keeps that were fetched longer ago than
// --older-than, by the database's clock. Money is not touched: executions, their outcomes and
// reports stay, and an answer recorded by a router is still replayed, without the image.
func pruneImagesCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := command.NewFlagSet("gongbu prune-images", getenv, stderr)
	dbURL := databaseURLFlag(fs)
	olderThan := fs.Duration("older-than", "", 0, "delete images fetched longer ago than this; at least 24h")
	dryRun := fs.Bool("dry-run", "", false, "count what would be deleted, delete nothing")
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	if err := requireDatabaseURL(*dbURL); err != nil {
		return err
	}
	if *olderThan < minImageAge {
		return fmt.Errorf("--older-than must be at least %s: a redelivery or get_execution embeds the image from Gongbu", minImageAge)
	}
	store, pool, err := openStore(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	images, bytes, err := store.PrunableImages(ctx, *olderThan)
	if err != nil {
		return err
	}
	if *dryRun {
		fmt.Fprintf(stdout, "would delete %d images (%d bytes) fetched more than %s ago\n", images, bytes, *olderThan)
		return nil
	}
	var deleted int64
	for {
		n, err := store.PruneImages(ctx, *olderThan, pruneImagesBatch)
		if err != nil {
			return fmt.Errorf("%w (after deleting %d images)", err, deleted)
		}
		deleted += n
		if n < pruneImagesBatch {
			break
		}
		select { // a pause between batches leaves the database to the services
		case <-ctx.Done():
			return fmt.Errorf("stopped after deleting %d images: %w", deleted, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	fmt.Fprintf(stdout, "deleted %d images fetched more than %s ago\n", deleted, *olderThan)
	return nil
}
