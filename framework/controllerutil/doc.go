// Package controllerutil holds the object edits most reconcilers make, under
// the names controller-runtime users know: owner references (refusing to
// take an object another owner controls), finalizers, merge patches computed
// from a before-and-after pair, and create-or-update / create-or-patch
// through a converge client.
//
// Guarantees:
//   - SetControllerReference never replaces another controller: it returns
//     an *AlreadyOwnedError naming the object and its controller instead.
//   - The finalizer helpers report whether they changed the object, so a
//     reconciler writes only when something changed.
//   - CreateOrUpdate and CreateOrPatch write nothing when mutate leaves the
//     object as the cache holds it, and report what they did.
//
// See ExampleCreateOrUpdate.
package controllerutil
