package fake

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// The discovery documents: enough for client-go's discovery client and
// the RESTMapper built on it (legacy discovery; a request for aggregated
// discovery gets it too, and client-go falls back).

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) serveVersion(w http.ResponseWriter) {
	writeJSON(w, version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2-fake", Platform: "fake"})
}

func (s *Server) serveAPIVersions(w http.ResponseWriter) {
	writeJSON(w, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
}

// groups returns the API groups (the legacy core group left out) with
// their versions, the preferred (newest) version first.
func (s *Server) groups() []metav1.APIGroup {
	var out []metav1.APIGroup
	for _, gv := range s.kinds.groupVersions() {
		if gv.Group == "" {
			continue
		}
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		if n := len(out); n > 0 && out[n-1].Name == gv.Group {
			out[n-1].Versions = append(out[n-1].Versions, v)
			continue
		}
		out = append(out, metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}})
	}
	for i := range out {
		slices.SortFunc(out[i].Versions, func(a, b metav1.GroupVersionForDiscovery) int {
			return -version.CompareKubeAwareVersionStrings(a.Version, b.Version)
		})
		out[i].PreferredVersion = out[i].Versions[0]
	}
	return out
}

func (s *Server) serveGroups(w http.ResponseWriter) {
	writeJSON(w, metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: s.groups()})
}

func (s *Server) serveGroup(w http.ResponseWriter, name string) {
	for _, g := range s.groups() {
		if g.Name == name {
			g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
			writeJSON(w, g)
			return
		}
	}
	http.NotFound(w, nil)
}

// verbs are the verbs every served resource has.
var verbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

func (s *Server) serveResources(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion) {
	list := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	for _, k := range s.kinds.byGVK {
		if k.gvk.GroupVersion() != gv {
			continue
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: k.gvr.Resource, SingularName: strings.ToLower(k.gvk.Kind), Namespaced: k.namespaced, Kind: k.gvk.Kind, Verbs: verbs,
		})
		if k.status {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: k.gvr.Resource + "/status", Namespaced: k.namespaced, Kind: k.gvk.Kind, Verbs: metav1.Verbs{"get", "patch", "update"},
			})
		}
	}
	if len(list.APIResources) == 0 {
		http.NotFound(w, r)
		return
	}
	slices.SortFunc(list.APIResources, func(a, b metav1.APIResource) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, list)
}
