// Package webhook serves Kubernetes admission and conversion webhooks as
// plain http.Handlers: a [Defaulter] behind a mutating webhook, a
// [Validator] behind a validating webhook, and hub-and-spoke conversion
// ([Hub], [Convertible]) behind a CustomResourceDefinition's conversion
// webhook. The framework's Manager registers them and serves them over TLS
// (framework.AddWebhook, framework.AddConversion); this package holds only
// the handlers, so it can be tested without a server.
//
// Guarantees:
//
//   - Typed: a handler decodes the request's object into a fresh T (never a
//     shared object), reading JSON keys case-sensitively as the API server
//     and client-go do (so {"teeth":1000,"Teeth":5} has 1000 teeth, not the
//     5 encoding/json would pick), and refuses a request for another group, version or
//     kind with an AdmissionReview denial (code 400) naming both kinds,
//     except a subresource of another kind (the Scale of T's scale
//     subresource, sent by a rule such as "sprockets/*"), which passes
//     unchanged. A subresource of T (status) is handled like T.
//   - Defaulting is a patch: the mutating handler answers with the JSON
//     patch (RFC 6902) from the request's object to the object the
//     Defaulter changed in place; no patch when nothing changed. A Defaulter
//     error denies the request.
//   - Validation keeps its words: a Validator's error denies with the error
//     text as the message and code 403, unless it is (or wraps) an
//     apierrors.APIStatus, whose status (code, reason, details) is kept.
//     Its warnings reach the client (kubectl prints them) whether the
//     request is allowed or denied.
//   - Bad input gets a clear answer, never a panic: a method other than
//     POST gets 405, a Content-Type other than application/json gets 415, a
//     body over HandlerOptions.MaxRequestBytes (by default 7 MiB for an
//     admission review, 64 MiB for a conversion review, which carries a
//     whole list) gets 413,
//     a body that is not an admission.k8s.io/v1 AdmissionReview (or an
//     apiextensions.k8s.io/v1 ConversionReview) gets 400, and so does a
//     review without a request. Once the review decodes, a
//     problem with its object is an AdmissionReview denial carrying the
//     request's UID, which is what the API server expects.
//   - Conversion through one hub: every version of a kind converts to and
//     from the hub version, so n versions need 2(n−1) functions, not n².
//     A conversion error fails the whole ConversionReview with the error
//     text. Converted objects keep their metadata whatever the conversion
//     functions copy: only labels and annotations may change, as the API
//     server requires.
//   - Panics in user code are recovered and answered as a denial (or a
//     failed conversion) naming the panic, so one bad object cannot take the
//     server down.
//   - A typed nil error (a nil *MyError returned as an error) counts as no
//     error: it neither denies nor fails a conversion.
//   - The answer comes by the API server's deadline: the context of a
//     Defaulter or Validator ends by the timeout the API server sends with
//     the request (the webhook's timeoutSeconds) or when it hangs up, and a
//     handler whose user code is still running then answers without it (a
//     denial with code 504, or a failed conversion) instead of holding the
//     connection; the user code goes on in the background until it returns.
//   - Defaulting keeps what the Go type does not know: the patch is built
//     from the request's object and T before and after defaulting, so the
//     fields of the request that T lacks stay where they are, also inside a
//     struct T omits as zero (omitzero) until the Defaulter sets a field of
//     it. A field the Defaulter removes goes with everything in it. In a
//     list the Defaulter changed, each element keeps the unknown fields of
//     the request's element it is: the one equal to it; else the one with
//     its "name"; else the one unnamed element whose every value it kept
//     (the Defaulter added fields), if no other element kept them all too;
//     else, when the list kept its length and those elements their places,
//     the one at its index; else (the list grew, shrank or was reordered as
//     well) the one most like it, when each is the other's closest and they
//     kept at least as many values as they changed. An element none of
//     these names is built from T alone: unknown fields are never moved
//     onto another element. A list the Defaulter left as it was is not
//     touched.
//   - Defaulting leaves the server's defaults their place: in what the
//     Defaulter adds (a struct the request lacks, a list element), the
//     fields T encodes at their zero value although the Defaulter left
//     them unset (a struct field without omitempty) are not written, so a
//     CRD's structural default, which the API server applies after the
//     mutating webhooks, still fills them. A Defaulter cannot be told apart
//     from one that sets such a field to its zero value on purpose: that
//     field too is left to the server's default, as omitempty would leave
//     it. Inside a struct the request already has, a zero value the
//     Defaulter sets is written.
//
// Paths follow kubebuilder's convention ([MutatePath], [ValidatePath],
// [ConvertPath]) so generated config/webhook manifests line up.
//
// See the package Examples.
package webhook
