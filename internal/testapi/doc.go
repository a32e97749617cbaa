// Package testapi holds a small API with two versions for the tests of
// webhooks and conversion: the kind Sprocket of group
// sprockets.converge.dev, served at v1 (the storage version) and v2 (the
// conversion hub). v1 has spec.color; v2 moves it to spec.paint.color, so a
// conversion that forgets the field shows.
//
// It is for tests only (test/layering enforces it); its deep copies go
// through JSON, short and slow.
package testapi
