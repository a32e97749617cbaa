// Package typednil tells a nil value apart from a non-nil one when it
// arrives in an interface: Is reports true for a nil interface and for an
// interface holding a nil pointer, map, slice, channel or function (a
// "typed nil", which compares unequal to nil). converge's constructors use
// it to refuse a typed-nil argument with an error naming it, and the
// webhook handlers to read a typed-nil error as no error.
package typednil

import "reflect"

// Is reports whether v is nil or holds a nil pointer, map, slice, channel
// or function.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func:
		return rv.IsNil()
	}
	return false
}
