package e2e_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/declarative"
	"github.com/converge-dev/converge/examples/staticsite/api/v1alpha1"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
	"github.com/converge-dev/converge/object"
)

var _ = Describe("declarative children of a kind the cache selects", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("rejects a child outside the cache's label selection, naming the child and the selector, and creates nothing", func(ctx SpecContext) {
		logs := &logCapture{}
		r := declarative.Func[*v1alpha1.StaticSite](func(context.Context, *v1alpha1.StaticSite) (declarative.State, error) {
			return declarative.State{Children: []any{&corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: "unselected"},
				Data:       map[string]string{"content": "x"},
			}}}, nil
		})
		startDeclarative(ctx, ns, r, []object.Object{&corev1.ConfigMap{}}, framework.Options{Logger: logs.logger(), Cache: informers.Options{
			ByKind: map[schema.GroupKind]informers.Selection{{Kind: "ConfigMap"}: {Labels: labels.SelectorFromSet(labels.Set{"team": "web"})}},
		}})
		createSite(ctx, ns, "site", anySpec)

		Eventually(ctx, loggedErrors(logs, fmt.Sprintf("child ConfigMap %s/unselected", ns), `its labels do not match the selector "team=web"`, "framework.Options.Cache.ByKind")).
			WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
		Consistently(ctx, func() bool {
			_, err := configMap(ctx, ns, "unselected")()
			return apierrors.IsNotFound(err)
		}).WithTimeout(time.Second).Should(BeTrue(), "a child the cache cannot see was created")
	}, SpecTimeout(2*time.Minute))

	It("applies, prunes and reverts a child the cache's label selection holds", func(ctx SpecContext) {
		r := declarative.Func[*v1alpha1.StaticSite](func(_ context.Context, site *v1alpha1.StaticSite) (declarative.State, error) {
			var children []any
			for page, content := range site.Spec.Pages {
				children = append(children, &corev1.ConfigMap{
					TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
					ObjectMeta: metav1.ObjectMeta{Name: page, Labels: map[string]string{"team": "web"}},
					Data:       map[string]string{"content": content},
				})
			}
			return declarative.State{Children: children}, nil
		})
		startDeclarative(ctx, ns, r, []object.Object{&corev1.ConfigMap{}}, framework.Options{Cache: informers.Options{
			ByKind: map[schema.GroupKind]informers.Selection{{Kind: "ConfigMap"}: {Labels: labels.SelectorFromSet(labels.Set{"team": "web"})}},
		}})
		site := createSite(ctx, ns, "site", v1alpha1.StaticSiteSpec{Pages: map[string]string{"a": "x", "b": "y"}})
		Eventually(ctx, configMapData(ctx, ns, "a")).WithTimeout(30 * time.Second).Should(HaveKeyWithValue("content", "x"))
		patchAs(ctx, corev1.SchemeGroupVersion.WithResource("configmaps"), ns, "a", types.MergePatchType, `{"data":{"content":"by hand"}}`)
		Eventually(ctx, configMapData(ctx, ns, "a")).WithTimeout(30*time.Second).Should(HaveKeyWithValue("content", "x"), "drift was not reverted")
		patchSite(ctx, ns, site.Name, `{"spec":{"pages":{"b":null}}}`)
		Eventually(ctx, func() bool {
			_, err := configMap(ctx, ns, "b")()
			return apierrors.IsNotFound(err)
		}).WithTimeout(30*time.Second).Should(BeTrue(), "a child no longer declared was not pruned")
	}, SpecTimeout(2*time.Minute))
})
