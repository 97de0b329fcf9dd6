package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/hubuapi"
)

var operationCommand = &command{UsageLine: "operation", Commands: []*command{
	{UsageLine: "show HANDLE", Short: "one operation", Run: (*cli).operationShow},
}}

var imageCommand = &command{
	UsageLine: "image HANDLE -o FILE [--preview]", Short: "save the image an operation produced", Run: (*cli).image,
	Long: `Saves the image a succeeded operation produced, as the executor keeps it (after the provider's
link has expired), to FILE; "-o -" writes it to standard output. --preview saves the scaled
JPEG copy kept of an image larger than 512 KiB instead.`,
}

var ledgerCommand = &command{
	UsageLine: "ledger HANDLE", Short: "ledger entries and totals of one operation", Run: (*cli).ledger,
	Long: `Prints the append-only ledger entries (hold, capture, release) of one operation and its totals.`,
}

func (c *cli) operationShow(ctx context.Context, fs *flag.FlagSet, args []string) error {
	handle, err := c.handleArg(fs, args)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.GetOperationWithResponse(ctx, handle)
	return show(c, resp, err, (*hubuapi.GetOperationResponse).GetJSON200, func(v *hubuapi.Operation) error { return writeOperation(c.stdout, v) })
}

func writeOperation(w io.Writer, op *hubuapi.Operation) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("Handle", clean(op.PublicHandle))
	row("State", string(op.State))
	if op.Denial != nil {
		row("Denial", clean(string(op.Denial.Code)+": "+op.Denial.Message))
	}
	row("Agent", op.AgentId.String())
	row("Account", clean(op.Account))
	row("Tool", clean(string(op.Tool)))
	row("Scope", clean(op.Scope.Provider+" "+op.Scope.Model+" "+op.Scope.Size))
	row("Amount", formatAmount(op.AmountMicros, op.Currency))
	row("Prompt", truncate(clean(op.Arguments.Prompt), 200))
	if op.Arguments.Seed != nil {
		row("Seed", fmt.Sprint(*op.Arguments.Seed))
	}
	if op.DecisionId != nil {
		row("Decision", op.DecisionId.String())
	}
	if op.DecidedBy != nil {
		row("Decided by", clean(*op.DecidedBy))
	}
	// Hubu keeps the expiry after a decision; it only means something while pending.
	if op.ApprovalExpiresAt != nil && op.State == hubuapi.OperationStatePendingApproval {
		row("Approval expires", formatTime(*op.ApprovalExpiresAt))
	}
	row("Held", formatAmount(op.HeldMicros, op.Currency))
	row("Captured", formatAmount(op.CapturedMicros, op.Currency))
	row("Released", formatAmount(op.ReleasedMicros, op.Currency))
	row("Created", formatTime(op.CreatedAt))
	row("Updated", formatTime(op.UpdatedAt))
	return tw.Flush()
}

func (c *cli) ledger(ctx context.Context, fs *flag.FlagSet, args []string) error {
	handle, err := c.handleArg(fs, args)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.GetOperationLedgerWithResponse(ctx, handle)
	return show(c, resp, err, (*hubuapi.GetOperationLedgerResponse).GetJSON200, func(v *hubuapi.Ledger) error { return writeLedger(c.stdout, v) })
}

func (c *cli) image(ctx context.Context, fs *flag.FlagSet, args []string) error {
	out := fs.String("o", "", "")
	preview := fs.Bool("preview", false, "")
	handle, err := c.handleArg(fs, args)
	if err != nil {
		return err
	}
	if *out == "" {
		return usagef("image: needs -o FILE (or -o - for standard output)")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	var params *hubuapi.GetOperationImageParams
	if *preview {
		params = &hubuapi.GetOperationImageParams{Preview: preview}
	}
	resp, err := cl.GetOperationImageWithResponse(ctx, handle, params)
	if err := expect(resp, err, func(r *hubuapi.GetOperationImageResponse) *[]byte {
		if r.StatusCode() != http.StatusOK {
			return nil
		}
		return &r.Body
	}); err != nil {
		return err
	}
	mimeType := resp.HTTPResponse.Header.Get("Content-Type")
	if err := contract.CheckImage(mimeType, resp.Body); err != nil {
		return fmt.Errorf("not an image from Hubu: %v", err)
	}
	if *out == "-" {
		_, err := c.stdout.Write(resp.Body)
		return err
	}
	if err := writeFileAtomic(*out, resp.Body); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "Saved %s (%s, %d bytes).\n", *out, mimeType, len(resp.Body))
	return nil
}

// writeFileAtomic writes b to path through a temporary file beside it, so that path is either
// left as it was or holds all of b.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // gone after the rename
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func writeLedger(w io.Writer, l *hubuapi.Ledger) error {
	fmt.Fprintf(w, "Operation %s (%s)\n\n", clean(l.PublicHandle), l.State)
	currency := l.Currency
	tw := newTable(w)
	if len(l.Entries) == 0 {
		fmt.Fprintln(tw, "No ledger entries.")
	} else {
		fmt.Fprintln(tw, "ID\tKIND\tAMOUNT\tAT")
		for _, e := range l.Entries {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", e.Id, e.Kind, formatAmount(e.AmountMicros, e.Currency), formatTime(e.CreatedAt))
		}
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "Price\t%s\n", formatAmount(l.AmountMicros, currency))
	if c := l.ProviderCostMicros; c != nil {
		note := ""
		if *c > l.AmountMicros {
			note = " (above the price held: only the price was captured; raise the difference with the provider)"
		}
		fmt.Fprintf(tw, "Provider's cost\t%s%s\n", formatAmount(*c, currency), note)
	}
	fmt.Fprintf(tw, "Held\t%s\n", formatAmount(l.HeldMicros, currency))
	fmt.Fprintf(tw, "Captured\t%s\n", formatAmount(l.CapturedMicros, currency))
	fmt.Fprintf(tw, "Released\t%s\n", formatAmount(l.ReleasedMicros, currency))
	return tw.Flush()
}

// parseHandle checks the spec's format here, so that a mistyped handle is a usage error
// rather than a round trip.
func parseHandle(s string) (string, error) {
	if !contract.IsPublicHandle(s) {
		return "", usagef("%q is not a public handle (hubu:public-operation:v1:<uuid>)", truncate(clean(s), 80))
	}
	return s, nil
}
