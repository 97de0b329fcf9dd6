package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"unicode/utf8"

	"hubu.dev/hubu/proto/hubuapi"
)

var approvalsCommand = &command{
	UsageLine: "approvals", Short: "operations waiting for a human decision", Run: (*cli).approvals,
	Long: `Lists the operations waiting for a human decision, oldest first.`,
}

var approveCommand = &command{
	UsageLine: "approve HANDLE", Short: "approve a held operation", Run: (*cli).approve,
	Long: `Approves an operation held for approval and issues its decision; the agent then resumes it.
Approving an operation that is already approved answers the same.`,
}

var denyCommand = &command{
	UsageLine: "deny HANDLE [--reason TEXT]", Short: "deny a held operation (releases its hold)", Run: (*cli).deny,
	Long: `Denies an operation held for approval and releases its hold. Denying it again answers the same.

  --reason TEXT   why (at most 500 characters), recorded with the decision`,
}

func (c *cli) approvals(ctx context.Context, fs *flag.FlagSet, args []string) error {
	if _, err := c.parse(fs, args, 0, ""); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.ListApprovalsWithResponse(ctx)
	return show(c, resp, err, (*hubuapi.ListApprovalsResponse).GetJSON200, func(l *hubuapi.OperationList) error {
		return writeApprovals(c.stdout, l.Operations)
	})
}

func writeApprovals(w io.Writer, ops []hubuapi.Operation) error {
	if len(ops) == 0 {
		_, err := fmt.Fprintln(w, "No operations are waiting for approval.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "HANDLE\tAGENT\tMODEL\tSIZE\tAMOUNT\tPROMPT\tREQUESTED\tEXPIRES")
	for _, op := range ops {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			clean(op.PublicHandle), op.AgentId, clean(op.Scope.Model), clean(op.Scope.Size),
			formatAmount(op.AmountMicros, op.Currency), truncate(clean(op.Arguments.Prompt), 40),
			formatTime(op.CreatedAt), formatTimePtr(op.ApprovalExpiresAt))
	}
	return tw.Flush()
}

func (c *cli) approve(ctx context.Context, fs *flag.FlagSet, args []string) error {
	handle, err := c.handleArg(fs, args)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.ApproveOperationWithResponse(ctx, handle)
	return show(c, resp, err, (*hubuapi.ApproveOperationResponse).GetJSON200, func(op *hubuapi.Operation) error {
		fmt.Fprintf(c.stdout, "Approved %s (%s). The agent can now resume it.\n\n", op.PublicHandle, formatAmount(op.AmountMicros, op.Currency))
		return writeOperation(c.stdout, op)
	})
}

func (c *cli) deny(ctx context.Context, fs *flag.FlagSet, args []string) error {
	reason := fs.String("reason", "", "")
	handle, err := c.handleArg(fs, args)
	if err != nil {
		return err
	}
	if utf8.RuneCountInString(*reason) > 500 {
		return usagef("hubuctl deny: --reason must be at most 500 characters")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	var body hubuapi.DenyRequest
	if *reason != "" {
		body.Reason = reason
	}
	resp, err := cl.DenyOperationWithResponse(ctx, handle, body)
	return show(c, resp, err, (*hubuapi.DenyOperationResponse).GetJSON200, func(op *hubuapi.Operation) error {
		fmt.Fprintf(c.stdout, "Denied %s; its hold is released.\n\n", op.PublicHandle)
		return writeOperation(c.stdout, op)
	})
}
