// Package serving holds the HTTP plumbing of the manager's servers: the
// health probes, /metrics and pprof. The framework package decides what each
// server serves and on which address; this package decides how.
//
// Guarantees:
//
//   - Fail fast: [Listen] opens the address at once and its error names the
//     server and the address, so a taken port fails Start, not a later scrape.
//   - Bounded: a server made by [NewServer] limits the time to read headers
//     (10 s), a whole request (30 s), a response (60 s) and an idle keep-alive
//     connection (90 s), and the size of request headers (64 KiB), so that
//     slow or hostile clients cannot hold connections or memory. A caller
//     may lift one limit for a server that needs it (pprof streams profiles
//     with no write timeout).
//   - HTTP/1.1 only unless enabled: [DisableHTTP2] turns HTTP/2 off for TLS
//     connections, and [TLSConfig] offers "h2" in ALPN only when asked to.
//   - Authenticated metrics: [AuthFilter] admits a request only when its
//     bearer token passes a TokenReview and its identity may "get" the path
//     (a SubjectAccessReview); tokens are never stored or logged.
//   - TLS 1.2 or later ([ServerTLSConfig]), with the certificate from a
//     directory or a fresh self-signed one.
//   - Rotation without restart: a [CertWatcher] reads its certificate and key
//     again from the next handshake on once either file changes (size, time
//     or inode: a Secret volume's symlink swap counts), keeps the last good
//     pair while a rotation is half-written, and its Check reports a pair
//     that does not load or is not valid now.
//   - Graceful stop: [Serve] returns nil once its context ends and the server
//     has shut down (waiting up to 5 s for requests in flight).
//   - Loopback only: [LoopbackOnly] serves a handler to loopback clients
//     asking for a loopback host name, and refuses every other request;
//     [LoopbackServer] tells an API server on this machine by its address.
//   - Probes as kube-apiserver serves them: [ProbeHandler] answers 200 "ok",
//     or 503 listing every check; ?verbose lists them either way.
package serving
