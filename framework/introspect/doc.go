// Package introspect is a manager's debug endpoint: the JSON it serves
// under Path (State, ObjectStatus, KeyStatus, QueuePage,
// NotConvergedPage), the page people read there, and KeyStatus.Explain, the
// lines converge explain and the page print for one object.
//
// The framework serves it on the metrics server, reading the manager
// through Provider; converge explain decodes the same JSON. The JSON
// carries names, namespaces, states, times and error texts, never an
// object's contents, and the endpoint is read-only.
package introspect
