package explore

import (
	"fmt"
	"syscall"
)

// intercept records every write, numbers the managers' writes, injects
// the Conflict and ServerError faults, and fires the Crash, Restart and
// Hold faults. serve sends the request to the server and returns the
// answer's status code (0 when none came); an error returned is the
// answer instead (serve was not called): an injected status, or a
// *lostError when no answer comes (the caller then answers with no
// response, only that error).
//
// A manager's write is numbered (from 1, over every manager) unless it
// retries a write a fault answered or cut off: the next write of that
// manager with the same verb and object. A fault that made the
// controllers retry thus shifts no later write's number, so a replay
// with fewer faults (shrinking) still lands each on its write.
func (s *schedule) intercept(req request, serve func() int) error {
	if !req.isWrite() {
		serve()
		return nil
	}
	w := Write{Manager: req.identity, Verb: req.verb, Kind: req.kind, Namespace: req.namespace, Name: req.name, Subresource: req.subresource}
	if req.identity == scenarioIdentity {
		w.Manager = ""
		w.Code = serve()
		s.record(w)
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	key := retryKey{req.identity, req.verb, req.kind.String(), req.namespace, req.name, req.subresource}
	w.attempt = s.number(key)
	fault := s.faultOn(w.attempt)
	if fault >= 0 {
		f := &s.faults[fault]
		switch f.Kind {
		case Conflict, ServerError:
			s.fire(fault)
			w.Injected = f
			s.cutOff(key)
			w.Code = 500
			err := apiInternal(req)
			if f.Kind == Conflict {
				w.Code, err = 409, apiConflict(req)
			}
			s.record(w)
			return err
		case Restart:
			// kube-apiserver dies as the write is sent: the write gets no
			// answer and takes no effect. It is not sent at all: sent
			// after the kill, its connection could be dialled once the
			// restarted kube-apiserver listens, and the write would wait
			// there and commit (on a busy machine, where this goroutine
			// runs late).
			if rp := s.plane.(*realPlane); rp.kill() == nil {
				s.fire(fault)
				w.Injected = f
				if rp.afterKill != nil {
					rp.afterKill(rp.awaitUp())
				}
				s.record(w)
				s.cutOff(key)
				return &lostError{req: req}
			}
		case Hold:
			// The write waits in the held connection while the next step
			// is applied (see scenario).
			s.plane.(*realPlane).hold()
			s.fire(fault)
			w.Injected = f
			signal(s.held)
		}
	}
	w.Code = serve()
	s.record(w)
	if w.Code == 0 {
		s.cutOff(key)
	}
	if !w.Committed() {
		return nil
	}
	if fault >= 0 && s.faults[fault].Kind == Crash {
		s.fire(fault)
		s.plane.crash(req.identity)
		select {
		case s.crashed <- req.identity:
		default:
		}
	}
	return nil
}

// cutOff notes that the write key names was answered by a fault or cut
// off: its retry gets no number (see number).
func (s *schedule) cutOff(key retryKey) {
	s.mu.Lock()
	s.retries[key] = true
	s.mu.Unlock()
}

// lostError is what a write a Restart fault met gets instead of an
// answer: its connection reset, as by a dead kube-apiserver.
type lostError struct{ req request }

func (e *lostError) Error() string {
	return fmt.Sprintf("explore: %s got no answer: kube-apiserver was killed as it was sent (a Restart fault): %v", e.req, syscall.ECONNRESET)
}

// Unwrap returns syscall.ECONNRESET, so that the client's checks for a
// reset connection (k8s.io/apimachinery/pkg/util/net.IsConnectionReset)
// see one.
func (e *lostError) Unwrap() error { return syscall.ECONNRESET }

// number returns the number of the write key names, or 0 when it retries
// a write a fault answered or cut off (which then is no longer owed).
func (s *schedule) number(key retryKey) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retries[key] {
		delete(s.retries, key)
		return 0
	}
	s.attempts++
	return s.attempts
}

// faultOn returns the index of the fault triggered by write n, or -1.
func (s *schedule) faultOn(n int) int {
	fault := -1
	for i, f := range s.faults {
		if n != 0 && f.Write == n && f.Kind != Lag && f.Kind != Expire {
			fault = i
		}
	}
	return fault
}

// fire records that fault i fired.
func (s *schedule) fire(i int) {
	s.mu.Lock()
	s.fired[i] = true
	s.mu.Unlock()
}

// signal wakes the receiver of c, if it is not already woken.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (s *schedule) record(w Write) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, w)
	if w.Committed() {
		s.committed++
	}
}
