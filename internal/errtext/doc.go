// Package errtext says errors for people: in log lines, conditions, Events
// and the debug endpoint. The API server quotes back the values it refuses
// (a whole pod template, with its literal environment values, when a Job's
// template cannot change): Of says each of its causes by field path, reason
// and short cause, without the value, and says the error on one line.
// converge's framework and declarative packages show every error through
// it.
package errtext
