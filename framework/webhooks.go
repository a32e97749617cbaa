package framework

import (
	"github.com/converge-dev/converge/framework/webhook"
	"github.com/converge-dev/converge/object"
)

// WebhookOptions says which admission webhooks NewWebhook serves for T.
// At least one field must be set.
type WebhookOptions[T object.Object] struct {
	// Defaulter sets T's defaults on create and update, served as a
	// mutating webhook on webhook.MutatePath of T's kind. Zero (nil) means
	// no mutating webhook for T.
	Defaulter webhook.Defaulter[T]

	// Validator admits or denies T's creates, updates and deletes, served
	// as a validating webhook on webhook.ValidatePath of T's kind. Zero
	// (nil) means no validating webhook for T.
	Validator webhook.Validator[T]
}

// NewWebhook registers admission webhooks for T (a type registered in the
// manager's scheme) on the manager's webhook server (Options.Webhook), which
// Start runs on every replica, leader or not, as soon as the manager starts.
// It is an error to register no webhook, to pass a typed nil Defaulter or
// Validator (the error names the argument), to register T's kind twice, or
// to register after Start.
func NewWebhook[T object.Object](mgr *Manager, opts WebhookOptions[T]) error {
	panic("TODO")
}

// NewConversion serves the conversion webhook (webhook.ConvertPath) for H's
// kind on the manager's webhook server: every version of that kind
// registered in the manager's scheme converts through the hub H, and each
// version other than H must implement webhook.Convertible. It is an error if
// a version does not, if the kind was registered before, or after Start.
func NewConversion[H webhook.Hub](mgr *Manager) error {
	panic("TODO")
}
