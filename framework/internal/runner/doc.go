// Package runner runs a manager's runnables in groups: each group runs its
// runnables on one context, reports the first failure, and at its stop
// cancels that context and waits for them, for a bounded time, naming the
// ones it abandoned. Package framework starts its servers, cache, clusters
// and controllers in such groups.
package runner
