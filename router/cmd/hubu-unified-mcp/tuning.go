package main

// gcPercent is the router's GOGC unless the environment sets one. Most of what the router
// allocates is garbage at once (the MCP SDK's decoder buffers, each message's JSON), while
// what stays live is small (some 10 MB under 200 sessions at once), so at Go's default of 100
// the heap grew to twice that between collections and made a seventh of the router's peak
// memory. At 50 it grows by half as much: make loadtest's 200 sessions peaked some 10 MB
// lower (78 → 68 MB) for a few per cent more of the router's CPU, which is a sixth of a
// spend's (docs/performance.md, 2026-12-04, night).
const gcPercent = 50
