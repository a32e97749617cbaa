package typednil_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/converge-dev/converge/internal/typednil"
)

type myErr struct{}

func (*myErr) Error() string { return "my error" }

func TestIs(t *testing.T) {
	var (
		nilPtr   *int
		nilMap   map[string]int
		nilSlice []int
		nilChan  chan int
		nilFunc  func()
		nilErr   *myErr
		anErr    error = nilErr
		zero     int
	)
	for name, tc := range map[string]struct {
		v    any
		want bool
	}{
		"nil interface":       {nil, true},
		"nil pointer":         {nilPtr, true},
		"nil map":             {nilMap, true},
		"nil slice":           {nilSlice, true},
		"nil channel":         {nilChan, true},
		"nil function":        {nilFunc, true},
		"typed nil error":     {anErr, true},
		"pointer":             {&zero, false},
		"zero int":            {zero, false},
		"empty map":           {map[string]int{}, false},
		"an error":            {errors.New("x"), false},
		"zero struct":         {struct{}{}, false},
		"non-nil error value": {&myErr{}, false},
	} {
		if got := typednil.Is(tc.v); got != tc.want {
			t.Errorf("%s: Is = %v, want %v", name, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	var nilErr *myErr
	for _, tc := range []struct {
		v    any
		want string
	}{
		{nil, "obj is nil"},
		{nilErr, "obj is a nil *typednil_test.myErr"},
		{(map[string]int)(nil), "obj is a nil map[string]int"},
		{&myErr{}, ""},
	} {
		err := typednil.Check("obj", tc.v)
		if got := fmt.Sprint(err); (err == nil) != (tc.want == "") || (err != nil && got != tc.want) {
			t.Errorf("Check(%T) = %v, want %q", tc.v, err, tc.want)
		}
	}
}
