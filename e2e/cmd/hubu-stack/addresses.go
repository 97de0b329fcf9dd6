package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"hubu.dev/hubu/e2e/stack"
)

// service is one process of the stack that listens: its key in addresses.json, the setting
// that moves it, and the default stack's fixed address.
type service struct{ key, env, fixed string }

var services = []service{
	{"hubu", "HUBU_STACK_HUBU_ADDR", "127.0.0.1:8081"},
	{"gongbu", "HUBU_STACK_GONGBU_ADDR", "127.0.0.1:8082"},
	{"mockflux", "HUBU_STACK_MOCKFLUX_ADDR", "127.0.0.1:8083"},
	{"router", "HUBU_STACK_ROUTER_ADDR", "127.0.0.1:8090"},
}

// addressesFile is where a named stack keeps the ports it was given.
const addressesFile = "addresses.json"

// addresses decides where each service listens. A HUBU_STACK_*_ADDR setting wins. Otherwise the
// default stack uses its fixed ports (a contract: docs/design.md), and a named stack uses the ports it
// was given when it first started: free ports, chosen once and kept in its state directory, so
// that the Codex and Claude Code configuration printed for it stays right across restarts, and
// never a port another stack of this checkout has been given (running or not) nor a default one.
func addresses(place stack.Place, getenv func(string) string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range services {
		out[s.key] = getenv(s.env)
	}
	if place.Name == "" {
		for _, s := range services {
			if out[s.key] == "" {
				out[s.key] = s.fixed
			}
		}
		return out, nil
	}
	kept, err := readAddresses(filepath.Join(place.Dir, addressesFile))
	if err != nil {
		return nil, err
	}
	taken, err := othersAddresses(place)
	if err != nil {
		return nil, err
	}
	chosen := false
	for _, s := range services {
		if kept[s.key] == "" {
			if kept[s.key], err = freeAddrNotIn(taken); err != nil {
				return nil, err
			}
			chosen = true
		}
		if out[s.key] == "" {
			out[s.key] = kept[s.key]
		}
	}
	if chosen {
		if err := writeAddresses(filepath.Join(place.Dir, addressesFile), kept); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// othersAddresses are the default stack's ports and every port kept by another named stack
// under .hubu/stacks/.
func othersAddresses(place stack.Place) (map[string]bool, error) {
	taken := map[string]bool{}
	for _, s := range services {
		taken[s.fixed] = true
	}
	files, err := filepath.Glob(filepath.Join(filepath.Dir(place.Dir), "*", addressesFile))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if filepath.Dir(f) == place.Dir {
			continue
		}
		addrs, err := readAddresses(f)
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			taken[a] = true
		}
	}
	return taken, nil
}

func freeAddrNotIn(taken map[string]bool) (string, error) {
	for range 100 {
		a, err := stack.FreeAddr()
		if err != nil {
			return "", err
		}
		if !taken[a] {
			taken[a] = true
			return a, nil
		}
	}
	return "", errors.New("no free loopback port that no other stack was given")
}

func readAddresses(path string) (map[string]string, error) {
	addrs := map[string]string{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return addrs, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &addrs)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v (remove it to choose new ports)", path, err)
	}
	return addrs, nil
}

func writeAddresses(path string, addrs map[string]string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(addrs, "", "  ")
	if err != nil {
		return err
	}
	// Written aside and renamed into place, so that another stack choosing its ports at the same
	// moment never reads this file half written.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".addresses-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
