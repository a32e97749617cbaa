package declarative

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// toMap converts a live object to its JSON form.
func toMap(obj runtime.Object) (map[string]any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object, nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// contains reports whether live holds every value want declares (the
// status check compares both ways with it), comparing lists as follows:
//
//   - Lists of objects with a merge key (containers and volumes by name,
//     ports, volume mounts...; see mergeKeys) are associative: each declared
//     element must be contained in the live element of the same key, and
//     elements other managers added may stay.
//   - Other lists (args, command, lists of scalars, of keyless objects) are
//     atomic: the live list must have the same length and contain the
//     declared elements in the same order. An element added, dropped or
//     moved by hand is drift, and is reverted.
//
// When in doubt it answers false.
func contains(live, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			lv, ok := l[k]
			if !ok || !contains(lv, wv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return false
		}
		if !associative(w) {
			if len(l) != len(w) {
				return false
			}
			for i := range w {
				if !contains(l[i], w[i]) {
					return false
				}
			}
			return true
		}
		if len(l) < len(w) {
			return false
		}
		for _, wv := range w {
			found := false
			for _, lv := range l {
				if contains(lv, wv) { // wv's key fields are compared too
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	default:
		return equalScalar(live, want)
	}
}

// associative reports whether the declared list w looks like an associative
// list: all its elements are objects that share a merge key holding a scalar,
// with no two elements alike on it.
func associative(w []any) bool {
	if len(w) == 0 {
		return false
	}
	for _, k := range mergeKeys {
		seen := map[any]bool{}
		ok := true
		for _, e := range w {
			m, isMap := e.(map[string]any)
			if !isMap {
				return false
			}
			v, has := m[k]
			if !has {
				ok = false
				break
			}
			switch v.(type) {
			case string, float64, int64, bool:
			default:
				ok = false
			}
			if !ok || seen[v] {
				ok = false
				break
			}
			seen[v] = true
		}
		if ok {
			return true
		}
	}
	return false
}

// equalScalar compares JSON scalars; numbers may be int64 on one side (the
// converter) and float64 on the other (encoding/json).
func equalScalar(a, b any) bool {
	fa, aNum := number(a)
	fb, bNum := number(b)
	if aNum && bNum {
		return fa == fb
	}
	return a == b
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
