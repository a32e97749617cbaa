package fake

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/converge-dev/converge/object"
)

// serveWatch streams the changes of q's kind after the request's
// resourceVersion (all current objects first when it has none, or when it
// asks for initial events), until the client goes, the timeout passes or
// the server closes.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, q request) {
	lo, sel, err := listOptions(r, q)
	if err != nil {
		s.writeError(w, r, &q, err)
		return
	}
	from, err := parseResourceVersion(q, lo.ResourceVersion)
	if err != nil {
		s.writeError(w, r, &q, err)
		return
	}
	initial := from == 0 || (lo.SendInitialEvents != nil && *lo.SendInitialEvents)

	send, err := s.startWatchStream(w, r, q)
	if err != nil {
		s.writeError(w, r, &q, err)
		return
	}

	var timeout <-chan time.Time
	if lo.TimeoutSeconds != nil && *lo.TimeoutSeconds > 0 {
		t := time.NewTimer(time.Duration(*lo.TimeoutSeconds) * time.Second)
		defer t.Stop()
		timeout = t.C
	}

	s.mu.Lock()
	pos := len(s.history)
	var start []object.Object
	startRV := s.rv
	if initial {
		start = s.selectLocked(q.kind, sel)
	} else {
		pos, _ = slices.BinarySearchFunc(s.history, from+1, func(e event, rv int64) int { return int(e.rv - rv) })
	}
	s.mu.Unlock()

	for _, obj := range start {
		if send(watch.Added, obj) != nil {
			return
		}
	}
	if lo.SendInitialEvents != nil && *lo.SendInitialEvents && lo.AllowWatchBookmarks {
		mark, err := s.newObject(q.kind)
		if err != nil {
			return
		}
		mark.SetResourceVersion(strconv.FormatInt(startRV, 10))
		mark.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		if send(watch.Bookmark, mark) != nil {
			return
		}
	}
	s.followWatch(r, q, sel, pos, send, timeout)
}

// startWatchStream negotiates the watch's stream encoding, writes the
// response's header, and returns the function that sends one event.
func (s *Server) startWatchStream(w http.ResponseWriter, r *http.Request, q request) (func(watch.EventType, runtime.Object) error, error) {
	enc := negotiate(s.codecs, r.Header.Get("Accept"), q.kind.proto)
	stream := enc.info.StreamSerializer
	if stream == nil {
		return nil, fmt.Errorf("no stream encoding for %s", enc.info.MediaType)
	}
	contentType := enc.contentType
	switch enc.info.MediaType {
	case runtime.ContentTypeProtobuf:
		contentType = strings.Replace(contentType, runtime.ContentTypeProtobuf, runtime.ContentTypeProtobuf+";stream=watch", 1)
	case runtime.ContentTypeCBOR:
		contentType = runtime.ContentTypeCBORSequence
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	events := streaming.NewEncoder(stream.Framer.NewFrameWriter(w), stream.Serializer)
	send := func(typ watch.EventType, obj runtime.Object) error {
		var buf strings.Builder
		if err := enc.info.Serializer.Encode(enc.shape(obj), &buf); err != nil {
			return err
		}
		return events.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: []byte(buf.String())}})
	}
	return send, nil
}

// followWatch sends the events of q's kind that pass sel from history
// position pos on, until the request ends, the server closes or timeout
// fires.
func (s *Server) followWatch(r *http.Request, q request, sel selection, pos int, send func(watch.EventType, runtime.Object) error, timeout <-chan time.Time) {
	identity := identityOf(r.Context())
	// held are the events LagWatches holds back, oldest first.
	type heldEvent struct {
		typ watch.EventType
		obj object.Object
	}
	var held []heldEvent
	stream := &watchStream{identity: identity, sent: pos}
	s.mu.Lock()
	s.watches[stream] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watches, stream)
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		batch := s.history[pos:]
		pos = len(s.history)
		changed := s.changed
		lag := s.lag[identity]
		s.mu.Unlock()
		release := 0 // held events that must go now: up to the identity's own last change
		for _, e := range batch {
			if e.kind != q.kind {
				continue
			}
			if typ, ok := filtered(e, sel); ok {
				held = append(held, heldEvent{typ, e.obj})
				if e.writer == identity {
					release = len(held)
				}
			}
		}
		release = max(release, len(held)-lag)
		for _, e := range held[:release] {
			if send(e.typ, e.obj) != nil {
				return
			}
		}
		held = held[release:]
		s.mu.Lock()
		stream.sent, stream.held = pos, len(held)
		s.mu.Unlock()
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		case <-timeout:
			return
		}
	}
}

// watchStream is one open watch, for WatchesCaughtUp.
type watchStream struct {
	identity string
	// sent is the history position up to which the stream has sent or
	// holds every event; held is how many it holds back. The server's mu
	// guards both.
	sent, held int
}

// WatchesCaughtUp reports whether every open watch of the client identity
// (see ConfigAs) has sent every change the server has made so far, but
// those a lag the identity still has (LagWatches) holds back. A watch's
// reader may still be decoding the last event it was sent.
func (s *Server) WatchesCaughtUp(identity string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	lagging := s.lag[identity] > 0
	for w := range s.watches {
		if w.identity == identity && (w.sent < len(s.history) || w.held > 0 && !lagging) {
			return false
		}
	}
	return true
}

// parseResourceVersion reads a request's resourceVersion parameter: 0
// when it has none.
func parseResourceVersion(q request, rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("%s: invalid resource version %q: not a number", q, rv))
	}
	return n, nil
}

// filtered returns the event a watch with selection sel sees for e: an
// object that enters the selection is added, one that leaves it deleted.
func filtered(e event, sel selection) (watch.EventType, bool) {
	now := sel.matches(e.obj)
	if e.typ != watch.Modified {
		return e.typ, now
	}
	before := sel.matches(e.prev)
	switch {
	case now && before:
		return watch.Modified, true
	case now:
		return watch.Added, true
	case before:
		return watch.Deleted, true
	}
	return "", false
}

// sortObjects sorts objs by namespace and name.
func sortObjects(objs []object.Object) {
	slices.SortFunc(objs, func(a, b object.Object) int {
		if c := strings.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
			return c
		}
		return strings.Compare(a.GetName(), b.GetName())
	})
}

// setList fills list with items and sets its resourceVersion.
func setList(list runtime.Object, items []runtime.Object, rv string) error {
	if err := meta.SetList(list, items); err != nil {
		return err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return err
	}
	lm.SetResourceVersion(rv)
	return nil
}

func fieldRequired(path, detail string) *field.Error {
	return field.Required(field.NewPath(path), detail)
}

func fieldInvalid(path, detail string) *field.Error {
	return field.Invalid(field.NewPath(path), nil, detail)
}
