package replicas

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/framework/fake"
	"github.com/converge-dev/converge/object"
)

// The README's converted controller is this file's code between its
// markers, byte for byte (less one tab of indentation, as the README shows
// Go at the top level).
func TestREADMEShowsTheConvertedController(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("replicas.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "// README begin\n")
	if !ok {
		t.Fatal("replicas.go has no README begin marker")
	}
	body, _, _ = strings.Cut(body, "\n// README end\n")
	_, section, ok := strings.Cut(string(readme), "\n## Migrating a controller-runtime controller\n")
	if !ok {
		t.Fatal(`README.md has no "## Migrating a controller-runtime controller" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "With converge:\n\n```go\n")
	if !ok {
		t.Fatal(`the README's migration section has no "With converge:" go block`)
	}
	block, _, _ = strings.Cut(block, "```\n")
	if block != body {
		t.Errorf("the README's converted controller differs from examples/replicas/replicas.go; copy one onto the other:\nREADME:\n%s\nreplicas.go:\n%s", block, body)
	}
}

// The converted controller writes each Deployment's ready replicas into a
// ConfigMap the Deployment owns, and follows a change of the status.
func TestReplicasOnFakeAPIServer(t *testing.T) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 2},
	}
	srv := fake.Start(t, fake.Options{Objects: []object.Object{d}})
	mgr, err := framework.NewManager(srv.Config(), framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	ready := func(want string) {
		t.Helper()
		var got *corev1.ConfigMap
		err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			got = &corev1.ConfigMap{}
			if err := mgr.APIReader().Get(ctx, types.NamespacedName{Namespace: "default", Name: "web-replicas"}, got); err != nil {
				return false, nil
			}
			return got.Data["ready"] == want, nil
		})
		if err != nil {
			t.Fatalf("ConfigMap web-replicas: want ready %s, got %+v", want, got)
		}
		if refs := got.OwnerReferences; len(refs) != 1 || refs[0].Name != "web" || refs[0].Kind != "Deployment" {
			t.Errorf("ConfigMap web-replicas is not owned by Deployment web: %+v", refs)
		}
	}
	ready("2")
	live := &appsv1.Deployment{}
	if err := mgr.APIReader().Get(t.Context(), types.NamespacedName{Namespace: "default", Name: "web"}, live); err != nil {
		t.Fatal(err)
	}
	live.Status.ReadyReplicas = 3
	if err := mgr.Client().Status().Update(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	ready("3")
}
