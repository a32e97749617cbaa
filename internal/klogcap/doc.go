// Package klogcap caps the verbosity of the loggers converge hands to
// client-go (through klog and through contexts).
//
// Guarantees:
//
//   - Capped: a logger returned by [Logger] or a sink returned by [Sink]
//     never enables or writes a line above [MaxLevel], whatever the
//     verbosity of the logger it wraps. From V(8) on, client-go writes
//     request and response bodies (Secret data) and at higher levels request
//     headers (bearer tokens); converge keeps those levels off whatever -v is.
//   - Sticky: the cap survives WithValues, WithName and WithCallDepth.
//   - Idempotent: capping a capped logger returns it unchanged.
//
// The package lives at the module root, not below framework, so that every
// converge package that calls client-go can use it.
package klogcap
