// Package typednil tells a nil value apart from a non-nil one when it
// arrives in an interface: Is reports true for a nil interface and for an
// interface holding a nil pointer, map, slice, channel or function (a
// "typed nil", which compares unequal to nil). converge's constructors and
// methods use Check to refuse a nil or typed-nil argument with an error
// naming it, and the webhook handlers use Is to read a typed-nil error as no
// error.
package typednil

import (
	"fmt"
	"reflect"
)

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

// Check returns nil when v is not nil (see Is), and otherwise an error
// naming the argument: "obj is nil" for a nil interface, "obj is a nil
// *v1.ConfigMap" for a typed nil. Callers prefix what was being done.
func Check(name string, v any) error {
	switch {
	case !Is(v):
		return nil
	case v == nil:
		return fmt.Errorf("%s is nil", name)
	}
	return fmt.Errorf("%s is a nil %T", name, v)
}
