// Package restset builds the REST clients converge's cache and client send
// their requests with: one per API group version and wire format, made on
// first use and shared by every caller of the same Set.
//
// Guarantees:
//
//   - Once: a Set makes at most one client per group version and format,
//     whatever the number of callers and goroutines; they share its
//     connections.
//   - One rate limit: every client of a Set draws on one client-side rate
//     limiter (the configuration's RateLimiter, else a token bucket of its
//     QPS and Burst), as a clientset's clients do.
//   - Fenced per request: a request whose context carries a fence
//     (WithFence) is refused, before it leaves the process, while the fence
//     fails, so that one shared client serves both fenced writes and
//     unfenced reads.
//   - Negotiated by the caller: a Set decides the content types of the
//     clients it makes; the codecs that decode the answers (protobuf in
//     place, CBOR) are the caller's, given to New once.
//
// The package lives at the module root, below informers and client, so that
// both can share one Set: the client sends its writes through the clients of
// the cache it reads from.
package restset
