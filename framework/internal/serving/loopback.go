package serving

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// LoopbackOnly admits only requests from a loopback address to a loopback
// host name: the debug endpoint of a plain-HTTP metrics server is not for
// the network (kubectl port-forward connects from loopback), and the Host
// check keeps a web page elsewhere from reading it through DNS rebinding.
func LoopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackAddr(r.RemoteAddr) || !loopbackHost(r.Host) {
			http.Error(w, "Forbidden: with Metrics.Insecure the debug endpoint is served only to loopback clients on a loopback host name (use kubectl port-forward)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackAddr reports whether addr, a host:port, is a loopback IP.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LoopbackServer reports whether server, a rest.Config's Host (a URL, or a
// host with or without a port), is localhost or a loopback IP: a server on
// this machine, with no network between the client and it.
func LoopbackServer(server string) bool {
	if u, err := url.Parse(server); err == nil && u.Host != "" {
		server = u.Host
	}
	return server != "" && loopbackHost(server)
}

// loopbackHost reports whether hostport names a loopback host.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
