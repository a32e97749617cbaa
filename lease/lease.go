// Package lease holds the options of a coordination.k8s.io Lease that
// processes take turns holding: the leader election Lease of a manager
// (framework.LeaderElectionOptions.Lease) and the Leases of a sharding ring
// (sharding.Options.Lease) take the same five. It imports only the standard
// library.
package lease

import "time"

// Options times and places a Lease. The zero value is a valid
// configuration: each field says what zero means, and the framework fills
// in those defaults in one place.
type Options struct {
	// Namespace holds the Lease. Zero means the namespace of the pod's
	// service account when running in a cluster, "default" otherwise.
	Namespace string

	// Identity names this process in the Lease. Zero means the hostname
	// plus a random suffix.
	Identity string

	// Duration is how long a Lease stays valid after its holder's last
	// renewal: how long the others wait before taking over from a holder
	// that stopped renewing. It must be longer than RenewDeadline. Zero
	// means 15 s.
	Duration time.Duration

	// RenewDeadline is how long after the start of its last successful
	// renewal the holder still acts as the holder: a leader retries
	// renewing that long before it gives up leadership, and a ring member
	// still writes for a bucket. Zero means 10 s.
	RenewDeadline time.Duration

	// RetryPeriod is the interval between attempts to acquire or renew.
	// It must be positive and shorter than RenewDeadline (leader election:
	// RenewDeadline greater than 1.2 × RetryPeriod). Zero means 2 s.
	RetryPeriod time.Duration
}
