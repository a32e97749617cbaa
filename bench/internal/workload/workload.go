// Package workload defines the objects the benchmark creates and changes: one
// kind per workload, how each object is built, how the driver changes it, and
// the field every contender reports back ("gen"); for the write workload
// (Parents), the parent kind and what its children must hold.
package workload

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Kind names a workload.
type Kind string

const (
	ConfigMaps Kind = "configmaps"
	Pods       Kind = "pods"
	Widgets    Kind = "widgets"
	// Parents is the write workload: Apps, each declaring a ConfigMap and a
	// Deployment and writing its status (see App).
	Parents Kind = "parents"
)

// Kinds lists the workloads in the order the benchmark runs them.
var Kinds = []Kind{ConfigMaps, Pods, Widgets, Parents}

// GenAnnotation holds a Pod's gen.
const GenAnnotation = "bench.converge.dev/gen"

// WidgetGVR is the resource of Widgets.
var WidgetGVR = WidgetGroupVersion.WithResource("widgets")

// Namespace is the namespace of the objects of k.
func Namespace(k Kind) string { return "bench-" + string(k) }

// Key is the namespace and name of the i-th object of k.
func Key(k Kind, i int) (namespace, name string) { return Namespace(k), Name(k, i) }

// Name returns the name of the i-th object.
func Name(k Kind, i int) string {
	switch k {
	case ConfigMaps:
		return fmt.Sprintf("cm-%05d", i)
	case Pods:
		return fmt.Sprintf("web-%02d-%05d", i%deployments, i)
	case Parents:
		return fmt.Sprintf("app-%05d", i)
	}
	return fmt.Sprintf("widget-%05d", i)
}

// deployments is how many "deployments" the Pods are spread over: pods of
// one deployment share their spec, as replicas do.
const deployments = 50

// payload returns n bytes of text unique to seed.
func payload(seed, n int) string {
	var b strings.Builder
	b.Grow(n + 32)
	x := uint64(seed)*0x9E3779B97F4A7C15 + 1
	for b.Len() < n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b.WriteString(strconv.FormatUint(x, 36))
	}
	return b.String()[:n]
}

// NewConfigMap returns the i-th ConfigMap: about 1 KiB of data and the gen key.
func NewConfigMap(ns string, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: Name(ConfigMaps, i), Namespace: ns, Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"payload": payload(i, 1024), "gen": "0"},
	}
}

// NewPod returns the i-th Pod, with the spec a Deployment's replica typically
// has: an init container, an application container and a sidecar, probes,
// resources, a hardened security context, the projected service account
// token volume, tolerations and anti-affinity.
func NewPod(ns string, i int) *corev1.Pod {
	d := i % deployments
	app := fmt.Sprintf("web-%02d", d)
	hash := payload(d, 10)
	labels := map[string]string{
		"app.kubernetes.io/name":      app,
		"app.kubernetes.io/instance":  app + "-prod",
		"app.kubernetes.io/component": "frontend",
		"app.kubernetes.io/part-of":   "shop",
		"pod-template-hash":           hash,
	}
	image := fmt.Sprintf("registry.example.com/shop/%s:v1.%d.3", app, d)
	env := []corev1.EnvVar{
		{Name: "LOG_LEVEL", Value: "info"},
		{Name: "LISTEN_ADDR", Value: ":8080"},
		{Name: "DATABASE_URL", Value: "postgres://shop@db.shop.svc.cluster.local:5432/shop?sslmode=require"},
		{Name: "CACHE_URL", Value: "redis://cache.shop.svc.cluster.local:6379/0"},
		{Name: "FEATURE_FLAGS", Value: "checkout-v2,recommendations,new-search"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "GOMAXPROCS", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
	}
	secCtx := &corev1.SecurityContext{
		RunAsNonRoot:             ptr(true),
		ReadOnlyRootFilesystem:   ptr(true),
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	res := func(cpu, mem, cpuLim, memLim string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLim), corev1.ResourceMemory: resource.MustParse(memLim)},
		}
	}
	probe := func(path string, delay int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			InitialDelaySeconds: delay, PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3,
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(Pods, i),
			Namespace: ns,
			Labels:    labels,
			Annotations: map[string]string{
				"prometheus.io/scrape":                    "true",
				"prometheus.io/port":                      "9090",
				"kubectl.kubernetes.io/default-container": "app",
				"checksum/config":                         payload(1000+d, 64),
				GenAnnotation:                             "0",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-" + hash,
				UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-0000000000%02d", d)), Controller: ptr(true), BlockOwnerDeletion: ptr(true),
			}},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName:            "default",
			AutomountServiceAccountToken:  ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(30)),
			NodeSelector:                  map[string]string{"kubernetes.io/os": "linux", "node.kubernetes.io/pool": "general"},
			SecurityContext:               &corev1.PodSecurityContext{RunAsUser: ptr(int64(10001)), RunAsGroup: ptr(int64(10001)), FSGroup: ptr(int64(10001))},
			InitContainers: []corev1.Container{{
				Name: "migrate", Image: image, Command: []string{"/app/migrate", "--wait-for-db", "--timeout=60s"},
				Env: env[:3], Resources: res("50m", "64Mi", "200m", "128Mi"), SecurityContext: secCtx,
			}},
			Containers: []corev1.Container{
				{
					Name: "app", Image: image,
					Command: []string{"/app/server"},
					Args:    []string{"--config=/etc/app/config.yaml", "--metrics-addr=:9090", "--graceful-shutdown=25s"},
					Ports: []corev1.ContainerPort{
						{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
						{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
					},
					EnvFrom:   []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-env"}}}},
					Env:       env,
					Resources: res("250m", "256Mi", "1", "512Mi"),
					VolumeMounts: []corev1.VolumeMount{
						{Name: "config", MountPath: "/etc/app", ReadOnly: true},
						{Name: "tls", MountPath: "/etc/tls", ReadOnly: true},
						{Name: "tmp", MountPath: "/tmp"},
						{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
					},
					LivenessProbe:   probe("/healthz", 10),
					ReadinessProbe:  probe("/readyz", 5),
					StartupProbe:    probe("/healthz", 0),
					ImagePullPolicy: corev1.PullIfNotPresent,
					SecurityContext: secCtx,
				},
				{
					Name: "proxy", Image: "registry.example.com/mesh/proxy:1.24.2",
					Args:      []string{"proxy", "sidecar", "--log-level=warning", "--concurrency=2"},
					Ports:     []corev1.ContainerPort{{Name: "proxy-admin", ContainerPort: 15000, Protocol: corev1.ProtocolTCP}},
					Env:       env[5:8],
					Resources: res("100m", "128Mi", "500m", "256Mi"),
					VolumeMounts: []corev1.VolumeMount{
						{Name: "tmp", MountPath: "/tmp"},
						{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
					},
					ReadinessProbe:  probe("/ready", 1),
					SecurityContext: secCtx,
				},
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: app + "-tls"}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					DefaultMode: ptr(int32(0o644)),
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3607))}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
						{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
					},
				}}},
			},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 100,
					PodAffinityTerm: corev1.PodAffinityTerm{
						TopologyKey:   "kubernetes.io/hostname",
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": app}},
					},
				}},
			}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": app}},
			}},
		},
	}
}

// NewWidget returns the i-th Widget, about 1 KiB as JSON.
func NewWidget(ns string, i int) *unstructured.Unstructured {
	config := map[string]any{}
	for k := range 6 {
		config[fmt.Sprintf("key%d", k)] = payload(i*7+k, 40)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": WidgetGroupVersion.String(),
		"kind":       "Widget",
		"metadata": map[string]any{
			"name":      Name(Widgets, i),
			"namespace": ns,
			"labels":    map[string]any{"app": "bench", "shard": strconv.Itoa(i % 16)},
		},
		"spec": map[string]any{
			"gen":         int64(0),
			"replicas":    int64(3),
			"image":       fmt.Sprintf("registry.example.com/widgets/w:%d", i%20),
			"description": payload(i, 400),
			"tags":        []any{"alpha", "beta", "gamma", strconv.Itoa(i)},
			"config":      config,
			"ports": []any{
				map[string]any{"name": "http", "port": int64(8080), "protocol": "TCP"},
				map[string]any{"name": "grpc", "port": int64(9090), "protocol": "TCP"},
			},
		},
	}}
}

// Patch returns the JSON merge patch that sets the gen of an object of kind k.
func Patch(k Kind, gen int64) []byte {
	switch k {
	case ConfigMaps:
		return fmt.Appendf(nil, `{"data":{"gen":"%d"}}`, gen)
	case Pods:
		return fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"%d"}}}`, GenAnnotation, gen)
	}
	return fmt.Appendf(nil, `{"spec":{"gen":%d}}`, gen)
}

// ConfigMapGen, PodGen and WidgetGen return the gen an object carries.
func ConfigMapGen(cm *corev1.ConfigMap) string { return cm.Data["gen"] }
func PodGen(p *corev1.Pod) string              { return p.Annotations[GenAnnotation] }
func WidgetGen(w *Widget) string               { return strconv.FormatInt(w.Spec.Gen, 10) }

// CRD returns the CustomResourceDefinition of Widgets.
func CRD() *unstructured.Unstructured {
	str := map[string]any{"type": "string"}
	integer := map[string]any{"type": "integer"}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "widgets." + WidgetGroupVersion.Group},
		"spec": map[string]any{
			"group": WidgetGroupVersion.Group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": WidgetGroupVersion.Version, "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{"type": "object", "properties": map[string]any{
							"gen": integer, "replicas": integer, "image": str, "description": str,
							"tags":   map[string]any{"type": "array", "items": str},
							"config": map[string]any{"type": "object", "additionalProperties": str},
							"ports": map[string]any{"type": "array", "items": map[string]any{
								"type": "object", "required": []any{"name", "port"},
								"properties": map[string]any{"name": str, "port": integer, "protocol": str},
							}},
						}},
						"status": map[string]any{"type": "object", "properties": map[string]any{
							"phase": str, "observedGeneration": integer,
						}},
					},
				}},
			}},
		},
	}}
}

// WidgetKind is the GroupVersionKind of Widgets.
var WidgetKind = schema.GroupVersionKind{Group: WidgetGroupVersion.Group, Version: WidgetGroupVersion.Version, Kind: "Widget"}

func ptr[T any](v T) *T { return &v }
