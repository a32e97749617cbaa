package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// buildProject scaffolds a project into a temporary folder with a replace
// pointing at this checkout, runs each of creates (converge create ...
// arguments, without --dir), then go mod tidy and controller-gen, go build
// and go vet (which type-checks the tests too). It returns the project's
// folder. go test -short skips it.
func buildProject(t *testing.T, creates ...[]string) string {
	t.Helper()
	checkout, dir := projectToBuild(t)
	mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir, "--converge-replace", checkout, "--skip-generate")
	for _, args := range creates {
		mustConverge(t, append(append([]string{"create"}, args...), "--dir", dir, "--skip-generate")...)
	}
	mustConverge(t, "init", "--module", "example.com/team/op", "--dir", dir) // go mod tidy and controller-gen
	goCmd(t, dir, "build", "./...")
	goCmd(t, dir, "vet", "./...")
	return dir
}

// create api --namespaced=false, kubebuilder's flag, makes a cluster-scoped
// kind: the CRD has scope Cluster, the sample and the specs name no
// namespace, the example controller writes its ConfigMap in a namespace it
// names, and its unit test on framework/fake passes.
func TestCreateClusterScopedAPI(t *testing.T) {
	dir := scaffoldFast(t)
	out := mustConverge(t, "create", "api", "--group", "tenancy", "--version", "v1alpha1", "--kind", "Tenant", "--namespaced=false", "--dir", dir, "--skip-generate")
	mustContain(t, "create api --namespaced=false output lacks", out, "create     api/tenancy/v1alpha1/tenant_types.go")
	mustContain(t, "tenant_types.go lacks", readFile(t, dir, "api/tenancy/v1alpha1/tenant_types.go"), "+kubebuilder:resource:path=tenants,singular=tenant,scope=Cluster\n")
	if types := readFile(t, dir, "api/shop/v1alpha1/order_types.go"); !strings.Contains(types, "scope=Namespaced\n") {
		t.Errorf("a kind made without --namespaced is not namespaced:\n%s", types)
	}
	if sample := readFile(t, dir, "config/samples/tenancy_v1alpha1_tenant.yaml"); strings.Contains(sample, "namespace") {
		t.Errorf("the sample of a cluster-scoped kind names a namespace:\n%s", sample)
	}
	mustContain(t, "tenant_controller.go lacks", readFile(t, dir, "internal/controller/tenant_controller.go"),
		"const TenantChildNamespace = \"default\"", "Namespace: TenantChildNamespace, Name: tenant.Name")
	spec := readFile(t, dir, "internal/controller/tenant_controller_test.go")
	mustContain(t, "tenant_controller_test.go lacks", spec, `ObjectMeta: metav1.ObjectMeta{Name: ns + "-sample"}`, "ConfigMaps(controller.TenantChildNamespace)", `types.NamespacedName{Name: ns + "-sample"}`)
	if strings.Contains(spec, "Namespace: ns") {
		t.Errorf("the spec of a cluster-scoped kind makes a namespaced object:\n%s", spec)
	}
	mustContain(t, "tenant_controller_unit_test.go lacks", readFile(t, dir, "internal/controller/tenant_controller_unit_test.go"),
		"ClusterScoped: []object.Object{&tenancyv1alpha1.Tenant{}}", `key := types.NamespacedName{Name: "sample"}`)

	// Every version of a kind shares the CRD's scope.
	expectRefused(t, dir, t.TempDir(), []string{"create", "api", "--group", "tenancy", "--version", "v1", "--kind", "Tenant", "--dir", dir},
		"kind Tenant was created cluster-scoped (--namespaced=false): every version of a kind shares its CRD, and so its scope; pass --namespaced=false", 1)
	mustConverge(t, "create", "api", "--group", "tenancy", "--version", "v1", "--kind", "Tenant", "--namespaced=false", "--dir", dir, "--skip-generate")
	mustContain(t, "the second version of Tenant lacks", readFile(t, dir, "api/tenancy/v1/tenant_types.go"), "scope=Cluster\n")
}

// A project with a cluster-scoped kind (and a webhook on it) builds and
// vets; controller-gen makes its CRD of scope Cluster, and its controller's
// unit test on framework/fake passes. go test -short skips it.
func TestClusterScopedAPIBuilds(t *testing.T) {
	dir := buildProject(t,
		[]string{"api", "--group", "tenancy", "--version", "v1alpha1", "--kind", "Tenant", "--namespaced=false"},
		[]string{"webhook", "--group", "tenancy", "--version", "v1alpha1", "--kind", "Tenant", "--defaulting", "--validation"},
	)
	mustContain(t, "the CRD of Tenant lacks", readFile(t, dir, "config/crd/bases/tenancy.example.com_tenants.yaml"), "scope: Cluster\n")
	out := goCmd(t, dir, "test", "-count=1", "-run", "TestTenantControllerOnFakeAPIServer", "-v", "./internal/controller/")
	mustContain(t, "the unit test of a cluster-scoped kind's controller", out, "--- PASS: TestTenantControllerOnFakeAPIServer")
}

// create webhook for a built-in kind, as kubebuilder's create webhook --group
// core --version v1 --kind Pod: no API is generated, the webhook uses the
// k8s.io/api type, and its markers name the kind's own group ("" for core)
// and the paths framework.AddWebhook serves.
func TestCreateBuiltinWebhook(t *testing.T) {
	dir := scaffoldFast(t) // a Deployment controller, an Order API
	out := mustConverge(t, "create", "webhook", "--group", "core", "--version", "v1", "--kind", "Pod", "--defaulting", "--dir", dir, "--skip-generate")
	mustContain(t, "create webhook for Pod output lacks", out,
		"converge create: defaulting webhook for built-in kind core/v1 Pod",
		"create     internal/webhook/v1/pod_webhook.go",
		"create     internal/controller/pod_v1_webhook_test.go",
		"update     main.go")
	if strings.Contains(out, "api/") {
		t.Errorf("a webhook of a built-in kind wrote an API:\n%s", out)
	}
	pod := readFile(t, dir, "internal/webhook/v1/pod_webhook.go")
	mustContain(t, "pod_webhook.go lacks", pod,
		`corev1 "k8s.io/api/core/v1"`,
		"framework.AddWebhook(mgr, framework.WebhookOptions[*corev1.Pod]{",
		"// +kubebuilder:webhook:path=/mutate--v1-pod,mutating=true,failurePolicy=fail,sideEffects=None,groups=\"\",resources=pods,verbs=create;update,versions=v1,name=mpod-v1.core.example.com,",
		`"values":["op-system","kube-system"]`,
		"func (PodDefaulter) Default(ctx context.Context, pod *corev1.Pod) error {")
	if strings.Contains(pod, "Validator") {
		t.Errorf("pod_webhook.go has a validator:\n%s", pod)
	}
	mustContain(t, "the Pod webhook spec lacks", readFile(t, dir, "internal/controller/pod_v1_webhook_test.go"),
		"func samplePodv1ForWebhook(ns, prefix string, annotations map[string]string) *corev1.Pod {",
		"webhookv1.DefaultPodMessage")

	out = mustConverge(t, "create", "webhook", "--group", "apps", "--version", "v1", "--kind", "Deployment", "--defaulting", "--validation", "--dir", dir, "--skip-generate")
	mustContain(t, "create webhook for Deployment output lacks", out, "create     internal/webhook/v1/deployment_webhook.go")
	mustContain(t, "deployment_webhook.go lacks", readFile(t, dir, "internal/webhook/v1/deployment_webhook.go"),
		`appsv1 "k8s.io/api/apps/v1"`,
		"path=/mutate-apps-v1-deployment,mutating=true,failurePolicy=fail,sideEffects=None,groups=apps,resources=deployments,verbs=create;update,versions=v1,name=mdeployment-v1.apps.example.com,",
		"path=/validate-apps-v1-deployment,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps,resources=deployments,verbs=create;update,versions=v1,name=vdeployment-v1.apps.example.com,",
		`apierrors.NewInvalid(appsv1.SchemeGroupVersion.WithKind("Deployment").GroupKind(), deployment.Name, errs)`)
	main := readFile(t, dir, "main.go")
	mustContain(t, "main.go lacks", main, "webhookv1.SetupPodWebhook(mgr)", "webhookv1.SetupDeploymentWebhook(mgr)")
	mustContain(t, "suite_test.go lacks", readFile(t, dir, "internal/controller/suite_test.go"), "webhookv1.SetupPodWebhook,", "webhookv1.SetupDeploymentWebhook,")
	if m := readFile(t, dir, manifestPath); !strings.Contains(m, `"builtin": true`) {
		t.Errorf("the manifest does not record the built-in webhooks:\n%s", m)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"conversion", []string{"--group", "apps", "--version", "v1", "--kind", "StatefulSet", "--conversion", "--spoke", "v1beta1"}, "the API server converts the built-in kinds itself", 2},
		{"unknown kind", []string{"--group", "core", "--version", "v1", "--kind", "Pdo", "--defaulting"}, `core/v1 has no kind "Pdo"`, 2},
		{"part twice", []string{"--group", "core", "--version", "v1", "--kind", "Pod", "--defaulting"}, "Pod core/v1 already has a defaulting webhook", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectRefused(t, dir, t.TempDir(), append(append([]string{"create", "webhook"}, tc.args...), "--dir", dir), tc.want, tc.code)
		})
	}
}

// A project with webhooks of built-in kinds (core Pod, apps Deployment)
// builds and vets, and controller-gen writes their configurations with the
// kinds' groups and the paths the framework serves. go test -short skips it.
func TestBuiltinWebhooksBuild(t *testing.T) {
	dir := buildProject(t,
		[]string{"webhook", "--group", "core", "--version", "v1", "--kind", "Pod", "--defaulting"},
		[]string{"webhook", "--group", "apps", "--version", "v1", "--kind", "Deployment", "--defaulting", "--validation"},
	)
	manifests := readFile(t, dir, "config/webhook/manifests.yaml")
	mustContain(t, "config/webhook/manifests.yaml lacks", manifests,
		"path: /mutate--v1-pod", "name: mpod-v1.core.example.com", "  - \"\"\n",
		"path: /mutate-apps-v1-deployment", "path: /validate-apps-v1-deployment", "  - apps\n",
		"namespaceSelector:", "- op-system")
	if _, err := os.Stat(filepath.Join(dir, "api")); !os.IsNotExist(err) {
		t.Errorf("webhooks of built-in kinds made an api folder: %v", err)
	}
}

// The same kind in two groups (ship's Frigate, then sea's): each has its
// own API package, CRD, sample and import alias, and the second one's
// controller, files, roles and Go identifiers take the group's name
// (SeaFrigate), so both build in internal/controller. A third kind whose
// name is that controller's is refused.
func TestSameKindInTwoGroups(t *testing.T) {
	dir := scaffoldFast(t) // a Deployment controller, an Order API
	mustConverge(t, "create", "api", "--group", "ship", "--version", "v1", "--kind", "Frigate", "--dir", dir, "--skip-generate")
	out := mustConverge(t, "create", "api", "--group", "sea", "--version", "v1", "--kind", "Frigate", "--dir", dir, "--skip-generate")
	mustContain(t, "create api of sea's Frigate output lacks", out,
		"create     api/sea/v1/frigate_types.go",
		"create     config/samples/sea_v1_frigate.yaml",
		"create     internal/controller/seafrigate_controller.go",
		"create     internal/controller/seafrigate_controller_test.go",
		"create     internal/controller/seafrigate_controller_unit_test.go",
		"create     config/rbac/seafrigate_admin_role.yaml",
		"internal/controller/seafrigate_controller.go (Desired)")
	mustContain(t, "seafrigate_controller.go lacks", readFile(t, dir, "internal/controller/seafrigate_controller.go"),
		`seav1 "example.com/team/op/api/sea/v1"`,
		"func SetupSeaFrigateController(mgr *framework.Manager) error {",
		`framework.NewBuilder[*seav1.Frigate](mgr, "seafrigate", framework.ControllerOptions{Sharded: sharded})`,
		"type SeaFrigateReconciler struct{}",
		"+kubebuilder:rbac:groups=sea.example.com,resources=frigates,verbs=get;list;watch;patch")
	mustContain(t, "frigate_controller.go lacks", readFile(t, dir, "internal/controller/frigate_controller.go"),
		`shipv1 "example.com/team/op/api/ship/v1"`, "func SetupFrigateController(", "type FrigateReconciler struct{}")
	mustContain(t, "the unit test lacks", readFile(t, dir, "internal/controller/seafrigate_controller_unit_test.go"), "func TestSeaFrigateControllerOnFakeAPIServer(t *testing.T) {", "controller.SetupSeaFrigateController(mgr)")
	mustContain(t, "controllers.go lacks", readFile(t, dir, "internal/controller/controllers.go"),
		"SetupFrigateController,", "SetupSeaFrigateController,", "shipv1.AddToScheme,", "seav1.AddToScheme,")
	mustContain(t, "the role lacks", readFile(t, dir, "config/rbac/seafrigate_admin_role.yaml"), "name: seafrigate-admin-role", "  - sea.example.com\n")
	mustContain(t, "config/rbac/kustomization.yaml lacks", readFile(t, dir, "config/rbac/kustomization.yaml"), "- frigate_admin_role.yaml", "- seafrigate_admin_role.yaml")
	mustContain(t, "config/crd/kustomization.yaml lacks", readFile(t, dir, "config/crd/kustomization.yaml"), "- bases/ship.example.com_frigates.yaml", "- bases/sea.example.com_frigates.yaml")
	mustContain(t, "config/samples/kustomization.yaml lacks", readFile(t, dir, "config/samples/kustomization.yaml"), "- ship_v1_frigate.yaml", "- sea_v1_frigate.yaml")

	// Re-running either changes nothing: each keeps its names.
	before := snapshot(t, dir)
	for _, group := range []string{"ship", "sea"} {
		out := mustConverge(t, "create", "api", "--group", group, "--version", "v1", "--kind", "Frigate", "--dir", dir, "--skip-generate")
		if !strings.Contains(out, " 0 created, 0 updated, 0 overwritten, ") {
			t.Errorf("re-running create api of %s's Frigate changed files:\n%s", group, out)
		}
	}
	if after := snapshot(t, dir); len(after) != len(before) {
		t.Errorf("a re-run changed the number of files from %d to %d", len(before), len(after))
	}
	// A second version of sea's Frigate is types only, under its group.
	out = mustConverge(t, "create", "api", "--group", "sea", "--version", "v2", "--kind", "Frigate", "--dir", dir, "--skip-generate")
	if !strings.Contains(out, "create     api/sea/v2/frigate_types.go") || strings.Contains(out, "_controller") {
		t.Errorf("create api of a second version of sea's Frigate:\n%s", out)
	}
	// A webhook names the group of its kind.
	expectRefused(t, dir, t.TempDir(), []string{"create", "webhook", "--group", "navy", "--version", "v1", "--kind", "Frigate", "--defaulting", "--dir", dir},
		"kind Frigate is in group ship.example.com and sea.example.com, not navy.example.com", 1)
	expectRefused(t, dir, t.TempDir(), []string{"create", "api", "--group", "fleet", "--version", "v1", "--kind", "SeaFrigate", "--dir", dir},
		"kind SeaFrigate of group fleet.example.com would name its controller SeaFrigate, as kind Frigate (sea.example.com/v1) does", 1)
	// A built-in kind's name taken by an API: the API's controller takes its group's name.
	out = mustConverge(t, "create", "api", "--group", "shop", "--version", "v1", "--kind", "Deployment", "--dir", dir, "--skip-generate")
	mustContain(t, "create api of shop's Deployment output lacks", out, "create     internal/controller/shopdeployment_controller.go")

	// Webhooks of both Frigates at v1 share the package internal/webhook/v1,
	// each with its own file and names.
	for _, group := range []string{"ship", "sea"} {
		mustConverge(t, "create", "webhook", "--group", group, "--version", "v1", "--kind", "Frigate", "--defaulting", "--validation", "--dir", dir, "--skip-generate")
	}
	mustContain(t, "frigate_webhook.go lacks", readFile(t, dir, "internal/webhook/v1/frigate_webhook.go"),
		"func SetupFrigateWebhook(", "framework.WebhookOptions[*shipv1.Frigate]", "name=mfrigate-v1.ship.example.com")
	mustContain(t, "seafrigate_webhook.go lacks", readFile(t, dir, "internal/webhook/v1/seafrigate_webhook.go"),
		"func SetupSeaFrigateWebhook(", "type SeaFrigateDefaulter struct{}", "framework.WebhookOptions[*seav1.Frigate]", "path=/mutate-sea-example-com-v1-frigate", "name=vfrigate-v1.sea.example.com")
	mustContain(t, "the sea Frigate's webhook spec lacks", readFile(t, dir, "internal/controller/seafrigate_v1_webhook_test.go"), "webhookv1.DefaultSeaFrigateMessage", `admission webhook "vfrigate-v1.sea.example.com" denied the request`)
	mustContain(t, "main.go lacks", readFile(t, dir, "main.go"), "webhookv1.SetupFrigateWebhook(mgr)", "webhookv1.SetupSeaFrigateWebhook(mgr)")
	// The built-in Deployment's webhook and shop's Deployment's, both at v1.
	mustConverge(t, "create", "webhook", "--group", "apps", "--version", "v1", "--kind", "Deployment", "--defaulting", "--dir", dir, "--skip-generate")
	mustConverge(t, "create", "webhook", "--group", "shop", "--version", "v1", "--kind", "Deployment", "--defaulting", "--dir", dir, "--skip-generate")
	mustContain(t, "main.go lacks", readFile(t, dir, "main.go"), "webhookv1.SetupDeploymentWebhook(mgr)", "webhookv1.SetupShopDeploymentWebhook(mgr)")
}

// A project with the same kind in two groups, and another group's kind
// named as a built-in one, each with webhooks at the same version, builds
// and vets, and controller-gen writes a CRD for each Frigate and every
// webhook's configuration. go test -short skips it.
func TestSameKindInTwoGroupsBuilds(t *testing.T) {
	dir := buildProject(t,
		[]string{"api", "--group", "ship", "--version", "v1", "--kind", "Frigate"},
		[]string{"api", "--group", "sea", "--version", "v1", "--kind", "Frigate"},
		[]string{"controller", "--group", "apps", "--version", "v1", "--kind", "Deployment"},
		[]string{"api", "--group", "shop", "--version", "v1", "--kind", "Deployment"},
		[]string{"webhook", "--group", "ship", "--version", "v1", "--kind", "Frigate", "--defaulting", "--validation"},
		[]string{"webhook", "--group", "sea", "--version", "v1", "--kind", "Frigate", "--defaulting", "--validation"},
		[]string{"webhook", "--group", "apps", "--version", "v1", "--kind", "Deployment", "--validation"},
		[]string{"webhook", "--group", "shop", "--version", "v1", "--kind", "Deployment", "--validation"},
	)
	mustContain(t, "config/webhook/manifests.yaml lacks", readFile(t, dir, "config/webhook/manifests.yaml"),
		"path: /mutate-ship-example-com-v1-frigate", "path: /mutate-sea-example-com-v1-frigate", "path: /validate-apps-v1-deployment", "path: /validate-shop-example-com-v1-deployment")
	for _, f := range []string{"config/crd/bases/ship.example.com_frigates.yaml", "config/crd/bases/sea.example.com_frigates.yaml", "config/crd/bases/shop.example.com_deployments.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("controller-gen did not write %s: %v", f, err)
		}
	}
	mustContain(t, "config/rbac/role.yaml lacks", readFile(t, dir, "config/rbac/role.yaml"), "- sea.example.com\n", "- ship.example.com\n")
	out := goCmd(t, dir, "test", "-count=1", "-run", "ControllerOnFakeAPIServer", "-v", "./internal/controller/")
	mustContain(t, "the unit tests", out, "--- PASS: TestFrigateControllerOnFakeAPIServer", "--- PASS: TestSeaFrigateControllerOnFakeAPIServer", "--- PASS: TestShopDeploymentControllerOnFakeAPIServer", "--- PASS: TestDeploymentControllerOnFakeAPIServer")
}
