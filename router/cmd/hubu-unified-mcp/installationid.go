package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"hubu.dev/hubu/kit/command"
	"hubu.dev/hubu/router/registry"
)

const installationIDUsage = `usage: hubu-unified-mcp installation-id [--state FILE|URL]
Prints the installation id of the registry FILE, or of the Postgres database a router fleet shares
(env ROUTER_STATE; the router's default file when unset),
creating the registry if it does not exist yet, as a router start would. Platforms that sign version 2
hubu.dev/platform-invocation envelopes put it in "audience"; every router sharing the registry has it.`

// installationID prints the registry's installation id, the audience of version 2 envelopes.
func installationID(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	getenv, err := stateSecret(getenv)
	if err != nil {
		return err
	}
	fs := command.NewFlagSet("hubu-unified-mcp installation-id", getenv, stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, installationIDUsage); fs.PrintDefaults() }
	state := stateFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("installation-id: unexpected argument %q", fs.Arg(0))
	}
	if *state, err = statePath(*state, getenv); err != nil {
		return err
	}
	reg, err := registry.Open(ctx, *state, nil)
	if err != nil {
		return fmt.Errorf("--state %s: %v", registry.Redact(*state), err)
	}
	id := reg.InstallationID()
	if err := reg.Close(); err != nil {
		return fmt.Errorf("--state %s: %v", registry.Redact(*state), err)
	}
	if id == "" {
		return errors.New("the registry has no installation id")
	}
	_, err = fmt.Fprintln(stdout, id)
	return err
}
