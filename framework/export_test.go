package framework

import "github.com/converge-dev/converge/framework/internal/fence"

// SetLeaseHook makes m's leader election, when Start joins it, hand its
// lock to hook first, for tests that stall or fail its renewals.
func SetLeaseHook(m *Manager, hook func(*fence.Lock)) { m.leaseHook = hook }
