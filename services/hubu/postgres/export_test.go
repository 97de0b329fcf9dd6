package postgres

// SetTestHookDecided makes s run f between Authorize's first read of the state and its write.
func SetTestHookDecided(s *Store, f func()) { s.testHookDecided = f }
