package informers_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/internal/testenv"
)

var configMapKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

func TestReadYourOwnWrites(t *testing.T) { inBothForms(t, testReadYourOwnWrites) }

func testReadYourOwnWrites(t *testing.T) {
	admin := plane.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	ns := testenv.Namespace(t, cs)
	testenv.CreateConfigMap(t, cs, ns, "a", nil)
	c := started(t, admin, informers.Options{Namespace: ns, ReadYourWritesTimeout: 500 * time.Millisecond})
	inf, err := informers.For[*corev1.ConfigMap](c, informers.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"}); err != nil {
		t.Fatal(err)
	}

	t.Run("a read after a write sees the write", func(t *testing.T) {
		for i := range 20 {
			cm, err := cs.CoreV1().ConfigMaps(ns).Update(t.Context(), &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns},
				Data:       map[string]string{"i": strconv.Itoa(i)},
			}, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c.ObserveWrite(configMapKind, cm)
			got, err := inf.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"})
			if err != nil {
				t.Fatal(err)
			}
			if got.Data["i"] != strconv.Itoa(i) {
				t.Fatalf("write %d: read back data %v from resourceVersion %s, written at %s", i, got.Data, got.ResourceVersion, cm.ResourceVersion)
			}
		}
	})

	t.Run("a write the cache never shows fails the read, naming it", func(t *testing.T) {
		c.ObserveWrite(configMapKind, &metav1.ObjectMeta{Namespace: ns, Name: "a", ResourceVersion: "999999999"})
		_, err := inf.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "a"})
		if err == nil || !strings.Contains(err.Error(), "has not caught up within 500ms") || !strings.Contains(err.Error(), ns+"/a") {
			t.Fatalf("Get = %v, want an error naming the object and the wait", err)
		}
		// Other objects are not held up.
		testenv.CreateConfigMap(t, cs, ns, "b", nil)
	})

	t.Run("a read after a deletion does not see the object", func(t *testing.T) {
		cm := testenv.CreateConfigMap(t, cs, ns, "gone", nil)
		c.ObserveWrite(configMapKind, cm) // the create, or the Get races its watch event
		if _, err := inf.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "gone"}); err != nil {
			t.Fatalf("created object not readable: %v", err)
		}
		if err := cs.CoreV1().ConfigMaps(ns).Delete(t.Context(), "gone", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		c.ObserveDeletion(configMapKind, cm)
		if _, err := inf.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "gone"}); err == nil {
			t.Fatal("deleted object still read from the cache after its deletion was observed")
		}
	})
}
