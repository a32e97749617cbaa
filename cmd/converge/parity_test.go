package main

import (
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
