package mcpserver

import "hubu.dev/hubu/router/registry"

// Waiters is how many deliveries of a call of the static agent wait for the one in flight:
// tests wait on it instead of guessing when a delivery has joined.
func (r *Router) Waiters(platform, callID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.flights[flightKey(registry.Call{Platform: platform, CallID: callID})]; ok {
		return f.waiters
	}
	return 0
}
