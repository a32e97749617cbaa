package framework

import (
	"net/http"
	"testing"
)

// TestWebhookIdleTimeoutOutlastsTheAPIServers: kube-apiserver's webhook
// client keeps an idle connection for http.DefaultTransport's
// IdleConnTimeout (client-go's transport defaults). The server must keep it
// longer, so the client always drops it first: a server that closes it at
// the moment the client reuses it fails that call (a POST is not retried),
// and with failurePolicy Fail, the user's request.
func TestWebhookIdleTimeoutOutlastsTheAPIServers(t *testing.T) {
	client := http.DefaultTransport.(*http.Transport).IdleConnTimeout
	if got := (WebhookServerOptions{}).withDefaults().IdleTimeout; got <= client {
		t.Errorf("default webhook IdleTimeout %v, want more than the API server's idle connection timeout %v", got, client)
	}
}
