package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
)

var credentialsCommand = &command{
	UsageLine: "credentials", Long: `Agent, operator, service and router credentials, named by their ID (never by their token).`,
	Commands: []*command{
		{UsageLine: "list", Short: "agent, operator, service and router credentials (never tokens)", Run: (*cli).credentialsList,
			Long: `Lists every credential with its state (active, expiring, expired, revoked), when it was made,
and who rotated or revoked it. Tokens are never shown: Hubu keeps only their hashes.

An OAuth grant (a person signed in with an invite code or OpenID Connect and allowed a client)
is an agent credential named "oauth: <client name>"; CLIENT is its client's name and LAST USED
when one of its tokens last reached a router (to the minute). Other credentials show "-" there.`},
		{UsageLine: "revoke ID", Short: "revoke a credential; its next request is refused", Run: (*cli).credentialsRevoke,
			Long: `Revokes a credential (find its ID with 'hubuctl credentials list'). Its holder's next request
is refused with credential_revoked; console sessions signed in with an operator credential end;
an OAuth grant's tokens are refused by its router within seconds. Hubu records who revoked it
and when. Revoking it again answers the same. The last operator credential with no expiry
cannot be revoked: create another operator first, or rotate it.`},
		{UsageLine: "rotate ID [--overlap DURATION]", Listed: "rotate ID [--overlap D]",
			Short: "issue a replacement; prints its token once", Run: (*cli).credentialsRotate,
			Long: `Issues a replacement for a credential (same kind, name and agent) and prints its token once.

  --overlap DURATION   how long the old token stays valid beside the new one, such as 10m
                       (default 0: the old token is refused at once; at most 24h), so that
                       the processes holding it can be restarted one at a time

A revoked credential can be replaced too (with no overlap). Each credential is replaced once:
to rotate again, rotate its replacement. An operator credential is rotated only by its holder;
another operator's is revoked instead. An OAuth grant has no token to rotate: revoke it, and
its person signs in again.`},
	},
}

func (c *cli) credentialsList(ctx context.Context, fs *flag.FlagSet, args []string) error {
	if _, err := c.parse(fs, args, 0, ""); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.ListCredentialsWithResponse(ctx)
	return show(c, resp, err, (*hubuapi.ListCredentialsResponse).GetJSON200, func(l *hubuapi.CredentialList) error {
		return writeCredentials(c.stdout, l.Credentials)
	})
}

func writeCredentials(w io.Writer, creds []hubuapi.Credential) error {
	if len(creds) == 0 {
		_, err := fmt.Fprintln(w, "No credentials.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tKIND\tNAME\tSTATE\tCREATED\tLAST USED\tEXPIRES\tREVOKED\tREVOKED BY\tCLIENT")
	for _, cr := range creds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cr.Id, clean(string(cr.Kind)), clean(cr.Name), clean(string(cr.State)),
			formatTime(cr.CreatedAt), formatTimePtr(cr.LastUsedAt), formatTimePtr(cr.ExpiresAt), formatTimePtr(cr.RevokedAt), refName(cr.RevokedBy),
			truncate(clientName(&cr), 40))
	}
	return tw.Flush()
}

// clientName names an OAuth grant's client: its name, else its id; "-" for any other credential.
func clientName(cr *hubuapi.Credential) string {
	if cr.ClientName != nil && clean(*cr.ClientName) != "" {
		return clean(*cr.ClientName)
	}
	return optional(cr.ClientId)
}

func (c *cli) credentialsRevoke(ctx context.Context, fs *flag.FlagSet, args []string) error {
	id, err := c.idArg(fs, args, "one credential ID", parseCredentialID)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	resp, err := cl.RevokeCredentialWithResponse(ctx, id)
	return show(c, resp, err, (*hubuapi.RevokeCredentialResponse).GetJSON200, func(cr *hubuapi.Credential) error {
		fmt.Fprintf(c.stdout, "Revoked %s credential %s (%s): its next request is refused.\n\n", clean(string(cr.Kind)), cr.Id, clean(cr.Name))
		return writeCredential(c.stdout, cr)
	})
}

func (c *cli) credentialsRotate(ctx context.Context, fs *flag.FlagSet, args []string) error {
	overlap := fs.Duration("overlap", 0, "")
	id, err := c.idArg(fs, args, "one credential ID", parseCredentialID)
	if err != nil {
		return err
	}
	if *overlap < 0 || *overlap > hubu.MaxRotationOverlap || *overlap%time.Second != 0 {
		return usagef("hubuctl credentials rotate: --overlap must be whole seconds between 0s and %s", hubu.MaxRotationOverlap)
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	var body hubuapi.RotateRequest
	if *overlap > 0 {
		seconds := int(*overlap / time.Second)
		body.OverlapSeconds = &seconds
	}
	resp, err := cl.RotateCredentialWithResponse(ctx, id, body)
	return show(c, resp, err, (*hubuapi.RotateCredentialResponse).GetJSON201, func(rot *hubuapi.CredentialRotated) error {
		return writeRotated(c.stdout, rot)
	})
}

func writeRotated(w io.Writer, rot *hubuapi.CredentialRotated) error {
	fmt.Fprintf(w, "Rotated %s credential %s (%s).\n", clean(string(rot.Replaced.Kind)), rot.Replaced.Id, clean(rot.Replaced.Name))
	switch {
	case rot.Replaced.State == hubuapi.CredentialStateExpiring && rot.Replaced.ExpiresAt != nil:
		fmt.Fprintf(w, "The old token stays valid until %s; restart its holders with the new token before then.\n", formatTime(*rot.Replaced.ExpiresAt))
	case rot.Replaced.State == hubuapi.CredentialStateRevoked:
		fmt.Fprintln(w, "The old token stays revoked.")
	default:
		fmt.Fprintln(w, "The old token is refused from now on.")
	}
	fmt.Fprintln(w)
	if err := writeCredential(w, &rot.Credential); err != nil {
		return err
	}
	printToken(w, rot.Token)
	return nil
}

func writeCredential(w io.Writer, cr *hubuapi.Credential) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("ID", cr.Id.String())
	row("Kind", clean(string(cr.Kind)))
	row("Name", clean(cr.Name))
	if cr.AgentId != nil {
		row("Agent", cr.AgentId.String())
	}
	row("State", clean(string(cr.State)))
	if cr.ClientId != nil {
		row("Client", clientName(cr))
		row("Client ID", optional(cr.ClientId))
		row("Last used", formatTimePtr(cr.LastUsedAt))
	}
	row("Created", formatTime(cr.CreatedAt))
	if cr.CreatedBy != nil {
		row("Issued by", refName(cr.CreatedBy))
	}
	if cr.Replaces != nil {
		row("Replaces", cr.Replaces.String())
	}
	if cr.ReplacedBy != nil {
		row("Replaced by", cr.ReplacedBy.String())
	}
	if cr.ExpiresAt != nil {
		row("Expires", formatTime(*cr.ExpiresAt))
	}
	if cr.RevokedAt != nil {
		row("Revoked", formatTime(*cr.RevokedAt))
		row("Revoked by", refName(cr.RevokedBy))
	}
	return tw.Flush()
}

// refName shows an operator credential as its name and ID.
func refName(r *hubuapi.CredentialRef) string {
	if r == nil {
		return "-"
	}
	return clean(r.Name) + " (" + r.Id.String() + ")"
}

func parseCredentialID(cmd, s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	switch {
	case err == nil && len(s) == 36:
		return id, nil
	case strings.HasPrefix(s, "hubu_"):
		// Never echoed: it is a token, given where an ID belongs.
		return uuid.UUID{}, usagef("%s: that is a token, not a credential ID: name a credential by the ID 'hubuctl credentials list' shows", cmd)
	}
	return uuid.UUID{}, usagef("%s: %q is not a credential ID (a UUID; see hubuctl credentials list)", cmd, truncate(clean(s), 80))
}
