// Command podphases is the controller of the README's "A complete
// controller": it logs each pod's phase and node, and exits 0 after SIGINT or
// SIGTERM once its reconciles have drained. A test keeps this file's twin,
// main.go, identical to the README's code.
package main
