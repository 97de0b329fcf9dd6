package mcpserver

// Waiters is how many deliveries of a call wait for the one in flight: tests wait on it
// instead of guessing when a delivery has joined.
func (r *Router) Waiters(platform, callID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.flights[platform+"\x00"+callID]; ok {
		return f.waiters
	}
	return 0
}
