package main

import (
	"slices"
	"strings"
)

// sample is a small valid object of a built-in kind, as Go source, for the
// generated test of a built-in controller. Kinds without one get a test that
// is skipped with a TODO.
type sample struct {
	// Fields follow ObjectMeta in the composite literal (may be empty).
	Fields string
	// ClusterScoped kinds have no namespace; the test names the object after
	// its namespace instead, which is unique.
	ClusterScoped bool
}

// Imports are the extra packages Fields uses besides the kind's own.
func (s *sample) Imports(own Resource) []string {
	var out []string
	for _, imp := range []struct{ alias, path string }{
		{"corev1", "k8s.io/api/core/v1"},
		{"intstr", "k8s.io/apimachinery/pkg/util/intstr"},
	} {
		if imp.alias != own.Alias() && strings.Contains(s.Fields, imp.alias+".") {
			out = append(out, imp.alias+` "`+imp.path+`"`)
		}
	}
	slices.Sort(out)
	return out
}

// The samples' building blocks; gofmt lays them out in the generated file.
const (
	samplePodSpec = `corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
	}`
	sampleJobSpec = `batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			},
		},
	}`
	sampleSelector    = `&metav1.LabelSelector{MatchLabels: map[string]string{"app": "sample"}}`
	samplePodTemplate = `corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sample"}},
		Spec: ` + samplePodSpec + `,
	}`
)

// workload is the spec of a Deployment, StatefulSet, DaemonSet or ReplicaSet.
func workload(specType string) sample {
	return sample{Fields: `Spec: appsv1.` + specType + `{
		Selector: ` + sampleSelector + `,
		Template: ` + samplePodTemplate + `,
	},`}
}

// samples maps group/version/Kind ("" group for core) to its sample.
var samples = map[string]sample{
	"/v1/ConfigMap":       {Fields: `Data: map[string]string{"key": "value"},`},
	"/v1/Secret":          {Fields: `StringData: map[string]string{"key": "value"},`},
	"/v1/ServiceAccount":  {},
	"/v1/Service":         {Fields: `Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},`},
	"/v1/Pod":             {Fields: `Spec: ` + samplePodSpec + `,`},
	"/v1/Namespace":       {ClusterScoped: true},
	"apps/v1/Deployment":  workload("DeploymentSpec"),
	"apps/v1/StatefulSet": workload("StatefulSetSpec"),
	"apps/v1/DaemonSet":   workload("DaemonSetSpec"),
	"apps/v1/ReplicaSet":  workload("ReplicaSetSpec"),
	"batch/v1/Job":        {Fields: `Spec: ` + sampleJobSpec + `,`},
	"batch/v1/CronJob": {Fields: `Spec: batchv1.CronJobSpec{
		Schedule:    "@hourly",
		JobTemplate: batchv1.JobTemplateSpec{Spec: ` + sampleJobSpec + `},
	},`},
	"policy/v1/PodDisruptionBudget": {Fields: `Spec: policyv1.PodDisruptionBudgetSpec{
		Selector:     ` + sampleSelector + `,
		MinAvailable: new(intstr.FromInt32(1)),
	},`},
	"networking.k8s.io/v1/NetworkPolicy": {},
	"networking.k8s.io/v1/Ingress": {Fields: `Spec: networkingv1.IngressSpec{
		DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "sample", Port: networkingv1.ServiceBackendPort{Number: 80}},
		},
	},`},
	"rbac.authorization.k8s.io/v1/Role":        {},
	"rbac.authorization.k8s.io/v1/ClusterRole": {ClusterScoped: true},
	"coordination.k8s.io/v1/Lease":             {},
}

// sampleFor returns r's sample, or nil when converge has none.
func sampleFor(r Resource) *sample {
	s, ok := samples[r.Group+"/"+r.Version+"/"+r.Kind]
	if !ok {
		return nil
	}
	return &s
}
