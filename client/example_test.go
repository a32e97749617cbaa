package client_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/converge-dev/converge/client"
	"github.com/converge-dev/converge/framework"
	"github.com/converge-dev/converge/informers"
)

// Delete every ConfigMap of one release in one namespace in one request;
// their dependents are deleted in the background.
func ExampleClient_DeleteAllOf() {
	ctx := context.Background()
	mgr, err := framework.NewManager(nil, framework.Options{})
	if err != nil {
		return
	}
	release := labels.SelectorFromSet(labels.Set{"release": "r1"})
	err = mgr.Client().DeleteAllOf(ctx, &corev1.ConfigMap{}, informers.Selection{Namespace: "apps", Labels: release},
		client.Propagation(metav1.DeletePropagationBackground))
	fmt.Println(err)
}
